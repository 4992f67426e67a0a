"""Migration 0018 adds the task's failure as a nullable column: a task's state stored before it
is kept as it was, reads as not failing, and is claimed on from."""

from __future__ import annotations

from pathlib import Path

from engine import ManualClock
from engine.drivers.sqlite import SqliteDriver
from tests.sqlite.earlier_schema import migrated_before
from tests.support.earlier_task_state import check_a_claim_continues_from


async def test_a_task_state_stored_before_failures_were_reads_as_not_failing(
    tmp_path: Path, clock: ManualClock
) -> None:
    path = tmp_path / "jobs.db"
    conn = migrated_before(path, 18)
    conn.execute(
        "INSERT INTO mcp_jobs_scheduler_state (task, last_fired_at, updated_at) "
        "VALUES ('nightly', 1000, 2000)"
    )
    conn.close()
    driver = SqliteDriver(str(path), clock=clock)
    try:
        await driver.migrate()
        state = await driver.task_state("nightly")
        assert state is not None
        assert (state.last_fired_at, state.updated_at, state.failure) == (1000, 2000, None)
        await check_a_claim_continues_from(driver, "nightly", 1000)
    finally:
        await driver.close()
