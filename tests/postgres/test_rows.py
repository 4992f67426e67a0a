"""Rule 5 in SQL: a stored status this build does not know is refused, never cast.

Each row is written by hand, as a newer deploy would have written it."""

from __future__ import annotations

import asyncpg
import pytest

from engine import ManualClock
from engine.drivers.postgres import PostgresDriver
from engine.errors import JobsError
from engine.settle import Settler
from schemas.backfill import BackfillRun
from schemas.jobs import JobFilter
from schemas.steps import StepRecord
from tests.postgres.builders import request


def assert_unknown(raised: pytest.ExceptionInfo[JobsError], table: str, value: str) -> None:
    assert raised.value.code == "JOB_ROW_STATUS_UNKNOWN"
    assert raised.value.details is not None
    assert (raised.value.details["table"], raised.value.details["value"]) == (table, value)


async def test_an_unknown_job_state_is_refused_on_every_read(
    driver: PostgresDriver, clock: ManualClock, sql: asyncpg.Connection[asyncpg.Record]
) -> None:
    (r,) = await driver.enqueue([request(clock.now_ms())])
    await sql.execute("UPDATE mcp_jobs.jobs SET state = 'paused' WHERE id = $1", r.id)
    with pytest.raises(JobsError) as raised:
        await driver.get(r.id)
    assert_unknown(raised, "jobs", "paused")
    with pytest.raises(JobsError) as raised:
        await driver.list_jobs(JobFilter())
    assert_unknown(raised, "jobs", "paused")
    with pytest.raises(JobsError) as raised:
        await driver.load_trace(r.id)
    assert_unknown(raised, "jobs", "paused")
    # Stats cannot bucket it, so they refuse rather than silently drop it from every count.
    with pytest.raises(JobsError) as raised:
        await driver.stats()
    assert_unknown(raised, "jobs", "paused")
    # Not a claimable state either: it is left alone, not re-run.
    assert await driver.claim("w", 10, 1000) == []


async def test_an_unknown_step_status_is_refused(
    driver: PostgresDriver, clock: ManualClock, sql: asyncpg.Connection[asyncpg.Record]
) -> None:
    (r,) = await driver.enqueue([request(clock.now_ms())])
    (claimed,) = await driver.claim("w", 1, 1000)
    step = StepRecord(
        job_id=r.id, run_id=r.run_id, name="one", status="completed", started_at=clock.now_ms()
    )
    await Settler(driver).save_step(r.id, claimed.token, step)
    await sql.execute("UPDATE mcp_jobs.steps SET status = 'half-done' WHERE run_id = $1", r.run_id)
    with pytest.raises(JobsError) as raised:
        await driver.load_steps(r.run_id)
    assert_unknown(raised, "steps", "half-done")


async def test_an_unknown_backfill_status_is_refused(
    driver: PostgresDriver, clock: ManualClock, sql: asyncpg.Connection[asyncpg.Record]
) -> None:
    await driver.backfill_save(
        BackfillRun(
            run_id="run-1",
            name="fill",
            checksum="c",
            environment="prod",
            status="running",
            app_version=None,
            rows_processed=0,
            started_at=clock.now_ms(),
        )
    )
    await sql.execute("UPDATE mcp_jobs.backfills SET status = 'paused'")
    with pytest.raises(JobsError) as raised:
        await driver.backfill_runs()
    assert_unknown(raised, "backfills", "paused")
