"""engine/run_context.py: the context a worker hands a body reads every field from the claimed
record, builds its step API, logger and reporter on first use (once), and stays immutable."""

from __future__ import annotations

import copy
import dataclasses
import logging

import pytest
from pydantic import BaseModel

from engine import JobContext, JobRegistry, ManualClock, Worker, connect, job
from engine.run_context import RunContext
from engine.settle import Settler
from engine.steps import StepApi
from schemas.jobs import ClaimedJob, JobRecord


class Item(BaseModel):
    n: int


def claimed_job(has_steps: bool) -> ClaimedJob:
    record = JobRecord(
        id="j1",
        run_id="r1",
        name="work",
        queue="q",
        tenant_id="acme",
        idempotency_key="k",
        input={},
        state="running",
        attempt=2,
        max_attempts=5,
        run_at=0,
        queued_at=0,
        created_at=0,
        updated_at=0,
        traceparent="00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
    )
    return ClaimedJob(record=record, token="t1", lease_expires_at=1, has_steps=has_steps)


async def test_a_run_context_reads_the_record_and_builds_its_parts_once() -> None:
    jobs = await connect("memory://", clock=ManualClock(), registry=JobRegistry())
    try:
        claimed = claimed_job(has_steps=False)
        ctx = RunContext(claimed, Settler(jobs.driver), jobs.clock, jobs.driver)
        assert isinstance(ctx, JobContext)
        built = ("step", "log", "reporter")
        names = [f.name for f in dataclasses.fields(JobContext) if f.name not in built]
        assert {name: getattr(ctx, name) for name in names} == {
            "job_id": "j1",
            "run_id": "r1",
            "name": "work",
            "queue": "q",
            "tenant_id": "acme",
            "attempt": 2,
            "max_attempts": 5,
            "clock": jobs.clock,
            "traceparent": claimed.record.traceparent,
            "driver": jobs.driver,
        }
        assert ctx.reported is None  # nothing reported: nothing built, nothing to flush
        assert isinstance(ctx.step, StepApi) and ctx.step is ctx.step
        assert ctx.log is ctx.log
        assert ctx.log.logger is logging.getLogger("mcp_jobs.job.work")
        assert ctx.log.extra == {"job": {"job_id": "j1", "name": "work", "attempt": 2}}
        ctx.progress(1, 2)
        assert ctx.reported is not None and ctx.reported is ctx.reporter
        assert copy.copy(ctx).job_id == "j1" and copy.copy(ctx).step is ctx.step
        with pytest.raises(dataclasses.FrozenInstanceError):
            ctx.job_id = "other"
        with pytest.raises(dataclasses.FrozenInstanceError):
            ctx.anything = 1
    finally:
        await jobs.close()


async def test_a_run_without_stored_steps_reads_none_and_one_with_them_loads_them() -> None:
    jobs = await connect("memory://", clock=ManualClock(), registry=JobRegistry())
    try:
        settler = Settler(jobs.driver)
        fresh = RunContext(claimed_job(has_steps=False), settler, jobs.clock, jobs.driver)
        again = RunContext(claimed_job(has_steps=True), settler, jobs.clock, jobs.driver)
        assert fresh.step._stored == {}
        assert again.step._stored is None  # loaded at its first step
    finally:
        await jobs.close()


async def test_a_body_sees_its_context_and_its_last_report_is_stored() -> None:
    jobs = await connect("memory://", clock=ManualClock(), registry=JobRegistry())
    seen: list[tuple[str, str, int, str | None]] = []
    try:

        @job(idempotency_key=lambda i: f"t:{i.n}", registry=jobs.registry)
        async def reports(input: Item, ctx: JobContext) -> int:
            seen.append((ctx.job_id, ctx.name, ctx.attempt, ctx.tenant_id))
            ctx.log.info("running")
            ctx.progress(1, 3, "one")
            doubled: int = await ctx.step.run("double", _double, input.n)
            # Inside the interval (the clock stands still): only the run's end stores it.
            ctx.progress(3, 3, "all")
            return doubled

        handle = await jobs.enqueue(reports, Item(n=4), tenant_id="acme")
        assert await Worker(jobs).run_until_idle() == 1
        record = await jobs.get(handle.id)
        assert record.state == "done" and record.output == 8
        assert seen == [(handle.id, "reports", 1, "acme")]
        assert record.progress is not None
        assert (record.progress.done, record.progress.message) == (3, "all")
    finally:
        await jobs.close()


async def _double(n: int) -> int:
    return 2 * n
