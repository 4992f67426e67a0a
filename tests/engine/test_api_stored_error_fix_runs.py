"""A failed job's `last_error`, read through the Python API (`jobs.get`, `jobs.list`,
`jobs.trace`), carries a fix written in that client's context, as an error it raises does: run
as given from another directory, `mcp-jobs jobs show ID …` reads this database and shows the
job, not `./.mcp-jobs/jobs.db`'s JOB_NOT_FOUND."""

from __future__ import annotations

import json

import anyio
import pytest
from pydantic import BaseModel

from engine import JobContext, JobRegistry, Jobs, Retry, Worker, job
from tests.support.fix_lines import run_fix


class Nothing(BaseModel):
    n: int


@pytest.mark.drivers("sqlite", "postgres", reason="a shell reaches a shared store only")
async def test_a_failed_jobs_stored_fix_runs_as_given(
    jobs: Jobs, registry: JobRegistry, database_url: str
) -> None:
    @job(idempotency_key=lambda i: str(i.n), retry=Retry(attempts=1), registry=registry)
    async def breaks(input: Nothing, ctx: JobContext) -> None:
        raise RuntimeError("kaput")

    made = await jobs.enqueue(breaks, {"n": 1})
    await Worker(jobs, prune=False).run_until_idle()
    record = await jobs.get(made.id)
    assert record.state == "dead" and record.last_error is not None
    fix = record.last_error.fix
    assert made.id in fix and "--database-url" in fix, fix
    listed = (await jobs.list(state="dead")).jobs[0].last_error
    traced = (await jobs.trace(made.id)).job.last_error
    assert listed is not None and traced is not None and listed.fix == traced.fix == fix
    shown = json.loads(await anyio.to_thread.run_sync(lambda: run_fix(fix)))
    assert shown["ok"] and shown["job"]["id"] == made.id
