"""`Backfills.runs_page(name, limit=…)` out of bounds is INVALID_ARGUMENT naming `limit`, the
parameter a Python caller passed (the faces' `runs_limit` is their own argument's name)."""

from __future__ import annotations

import pytest

from engine import Jobs
from engine.backfill import Backfills
from engine.errors import InvalidArgumentError

pytestmark = pytest.mark.drivers("memory", reason="refused before any driver read")


@pytest.mark.parametrize("limit", [0, 10_000])
async def test_a_limit_out_of_bounds_names_limit(jobs: Jobs, limit: int) -> None:
    with pytest.raises(InvalidArgumentError) as raised:
        await Backfills(jobs).runs_page("nightly", limit=limit)
    assert raised.value.argument == "limit"
    assert "runs_limit" not in raised.value.cause
