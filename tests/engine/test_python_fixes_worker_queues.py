"""`Worker(jobs, queues=...)` refuses a value that is no list of names (a number, bytes, a
mapping) as INVALID_ARGUMENT naming `queues`, never a bare TypeError."""

from __future__ import annotations

from typing import Any

import pytest

from engine import Jobs, Worker
from engine.errors import InvalidArgumentError

pytestmark = pytest.mark.drivers("memory", reason="refused at construction, before any driver")


@pytest.mark.parametrize("queues", [5, b"orders", {"orders": 1}])
async def test_queues_that_are_no_list_of_names_are_refused_typed(jobs: Jobs, queues: Any) -> None:
    with pytest.raises(InvalidArgumentError) as raised:
        Worker(jobs, queues=queues)
    assert raised.value.argument == "queues"
