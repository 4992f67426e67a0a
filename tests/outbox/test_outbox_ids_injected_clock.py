"""A staged row's id is made at the injected clock's instant, as a job's id is (rule 9: time is
the clock's, not this machine's): it was minted from the wall clock, so a test's ManualClock
and a machine whose clock is wrong saw outbox ids of another time than their jobs'."""

from __future__ import annotations

import time

from engine import JobRegistry, Jobs, ManualClock
from tests.outbox.apptx import AppDatabase
from tests.outbox.test_stage import declare_confirm


def _made_at(row_id: str) -> int:
    return int(row_id[:12], 16)  # engine.ids: the first 48 bits are the epoch ms


async def test_an_outbox_id_is_made_at_the_instant_its_job_id_is(
    jobs: Jobs, registry: JobRegistry, app: AppDatabase, clock: ManualClock
) -> None:
    confirm = declare_confirm(registry)
    wall = time.time_ns() // 1_000_000
    assert abs(clock.now_ms() - wall) > 86_400_000  # the test's clock is far from this machine's
    tx = await app.begin()
    staged = await jobs.stage(tx.handle, confirm, {"order_id": "o-1"})
    await tx.commit()
    # Ids only grow within a process, so an earlier test's ids may lead both: what must hold is
    # that the row's id is made at its job's instant, not at this machine's.
    assert abs(_made_at(staged.outbox_id) - _made_at(staged.job_id)) < 1_000
