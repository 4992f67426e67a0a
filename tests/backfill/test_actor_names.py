"""Who starts a backfill's pass (`actor`) is checked by the name rule where it is written, under
its own name: a line break or an escape is refused as INVALID_ARGUMENT with the mended actor,
and nothing is enqueued (it was refused later, by the enqueue, as `enqueued_by`)."""

from __future__ import annotations

import pytest

from engine import Jobs
from engine.backfill import BackfillRegistry, Backfills
from engine.errors import InvalidArgumentError
from tests.backfill.support import Customers


@pytest.mark.parametrize(
    ("bad", "mended"), [("ops\nFAKE", "opsFAKE"), ("ops\x1b[31m", "ops"), ("ops\u202e", "ops")]
)
async def test_a_pass_started_by_an_actor_with_a_control_character_is_refused(
    jobs: Jobs,
    backfills: Backfills,
    backfill_registry: BackfillRegistry,
    customers: Customers,
    bad: str,
    mended: str,
) -> None:
    customers.declare(backfill_registry, batch_size=10)
    with pytest.raises(InvalidArgumentError) as raised:
        await backfills.write("normalize_emails", actor=bad)
    assert raised.value.argument == "actor" and raised.value.nearest == mended
    assert (await jobs.list()).jobs == []
    start = await backfills.write("normalize_emails", actor=raised.value.nearest)
    assert (await jobs.get(start.job_id)).enqueued_by == mended
