"""Status narrowing on decode (rule 5): a stored status this build does not know is refused by
name, never cast. Each bad row is written by hand, as a newer deploy would have written it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from pydantic import BaseModel

from engine import JobContext, JobRegistry, Jobs, ManualClock, connect, job
from engine.drivers.sqlite.library import sqlite3
from engine.errors import JobsError
from schemas.backfill import BackfillRun


class Item(BaseModel):
    n: int


@pytest.fixture
async def jobs(tmp_path: Path, clock: ManualClock, registry: JobRegistry) -> AsyncIterator[Jobs]:
    @job(idempotency_key=lambda i: f"item:{i.n}", registry=registry)
    async def handle(input: Item, ctx: JobContext) -> None:
        return None

    client = await connect(f"sqlite:///{tmp_path}/jobs.db", clock=clock, registry=registry)
    yield client
    await client.close()


def _write(tmp_path: Path, sql: str, params: tuple[object, ...]) -> None:
    conn = sqlite3.connect(tmp_path / "jobs.db")
    with conn:
        conn.execute(sql, params)
    conn.close()


async def test_unknown_job_state_is_refused_by_every_reader(jobs: Jobs, tmp_path: Path) -> None:
    r = await jobs.enqueue("handle", {"n": 1})
    _write(tmp_path, "UPDATE mcp_jobs_jobs SET state = 'paused' WHERE id = ?", (r.id,))
    for read in (
        lambda: jobs.get(r.id),
        lambda: jobs.trace(r.id),
        lambda: jobs.list(),
        lambda: jobs.stats(),
    ):
        with pytest.raises(JobsError) as raised:
            await read()
        assert raised.value.code == "JOB_ROW_STATUS_UNKNOWN"
        assert raised.value.details == {
            "table": "mcp_jobs_jobs",
            "column": "state",
            "value": "paused",
        }


async def test_another_tenants_bad_row_is_not_found_not_decoded(jobs: Jobs, tmp_path: Path) -> None:
    r = await jobs.enqueue("handle", {"n": 1}, tenant_id="acme")
    _write(tmp_path, "UPDATE mcp_jobs_jobs SET state = 'paused' WHERE id = ?", (r.id,))
    with pytest.raises(JobsError) as raised:
        await jobs.get(r.id, tenant_id="globex")
    assert raised.value.code == "JOB_NOT_FOUND"


async def test_unknown_step_status_is_refused(jobs: Jobs, tmp_path: Path) -> None:
    # A laundered step status once re-ran a completed step: "done" is not "completed".
    r = await jobs.enqueue("handle", {"n": 1})
    _write(
        tmp_path,
        "INSERT INTO mcp_jobs_steps (run_id, name, job_id, status, started_at, attempts) "
        "VALUES (?, 'charge', ?, 'done', 0, 1)",
        (r.run_id, r.id),
    )
    with pytest.raises(JobsError) as raised:
        await jobs.driver.load_steps(r.run_id)
    assert raised.value.code == "JOB_ROW_STATUS_UNKNOWN"
    assert raised.value.details is not None and raised.value.details["value"] == "done"


async def test_unknown_backfill_status_is_refused(jobs: Jobs, tmp_path: Path) -> None:
    run = BackfillRun(
        run_id="r1",
        name="fill",
        checksum="c",
        environment="prod",
        status="running",
        app_version=None,
        rows_processed=0,
        started_at=1,
    )
    await jobs.driver.backfill_save(run)
    assert await jobs.driver.backfill_runs("fill") == [run]
    _write(tmp_path, "UPDATE mcp_jobs_backfills SET status = 'paused' WHERE run_id = 'r1'", ())
    with pytest.raises(JobsError) as raised:
        await jobs.driver.backfill_runs("fill")
    assert raised.value.code == "JOB_ROW_STATUS_UNKNOWN"
