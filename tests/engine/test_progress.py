"""engine/progress.py beside the kit: a driver without the capability, and a body run outside a
worker (no reporter) still has its reports checked."""

from __future__ import annotations

import logging

import pytest
from pydantic import BaseModel

from engine import JobContext, JobRegistry, ManualClock, Worker, connect, job
from engine.driver_errors import DriverUnavailableError
from engine.errors import JobsError
from engine.progress import ProgressReporter
from engine.steps import StepApi


class Item(BaseModel):
    n: int


class NoProgressDriver:
    """Offers no `save_progress`: the reporter must not call what is not there."""

    kind = "bare"


async def test_a_driver_without_progress_takes_reports_and_stores_nothing() -> None:
    reporter = ProgressReporter(NoProgressDriver(), ManualClock(), "j1", "t1", 1)
    reporter.report(1, 2, "one")
    await reporter.finish()
    assert not reporter.active
    reporter.report(2, 2)  # later reports are dropped at once
    assert not reporter.active


def test_a_context_without_a_reporter_still_checks_the_report() -> None:
    ctx = JobContext(
        job_id="j1",
        run_id="r1",
        name="n",
        queue="q",
        tenant_id=None,
        attempt=1,
        max_attempts=1,
        step=StepApi.__new__(StepApi),  # never used: progress does not touch steps
        clock=ManualClock(),
        log=logging.LoggerAdapter(logging.getLogger("t"), {}),
    )
    ctx.progress(1, 2, "fine")
    with pytest.raises(JobsError) as raised:
        ctx.progress(3, 2)
    assert raised.value.code == "INVALID_ARGUMENT" and raised.value.retryable is False
    assert "done=3" in raised.value.cause and "total (2)" in raised.value.cause


async def test_a_sync_step_reports_from_its_worker_thread() -> None:
    jobs = await connect("memory://", clock=ManualClock(), registry=JobRegistry())
    try:

        @job(idempotency_key=lambda i: f"t:{i.n}", registry=jobs.registry)
        async def threaded(input: Item, ctx: JobContext) -> None:
            def work() -> int:
                ctx.progress(2, 4, "in a thread")
                return 2

            await ctx.step.run("work", work)

        r = await jobs.enqueue(threaded, {"n": 1})
        await Worker(jobs).run_until_idle()
        record = await jobs.get(r.id)
        assert record.state == "done" and record.progress is not None
        assert (record.progress.done, record.progress.message) == (2, "in a thread")
    finally:
        await jobs.close()


class DownProgressDriver:
    """Its store refuses every write: `failure` is what each raises."""

    kind = "down"

    def __init__(self, failure: Exception) -> None:
        self.failure = failure

    async def save_progress(self, job_id: str, token: str, value: object) -> bool:
        raise self.failure


@pytest.mark.parametrize(
    ("failure", "traceback"),
    [(DriverUnavailableError("postgres", "connection refused"), False), (KeyError("x"), True)],
)
async def test_a_report_the_store_refuses_is_logged_once_a_traceback_only_for_a_defect(
    failure: Exception, traceback: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """While the database is down every report failed with a traceback in the log; a typed
    failure is one warning naming its code, anything else (a defect) keeps its traceback."""
    caplog.set_level(logging.WARNING, logger="engine")
    reporter = ProgressReporter(DownProgressDriver(failure), ManualClock(), "j1", "t1", 1)
    reporter.report(1, 2, "one")
    await reporter.finish()
    lost = [r for r in caplog.records if "progress of job j1 not stored" in r.getMessage()]
    assert len(lost) == 1, [r.getMessage() for r in caplog.records]
    assert (lost[0].exc_info is not None) is traceback
    if not traceback:
        assert lost[0].getMessage().endswith(": DRIVER_UNAVAILABLE: postgres: connection refused")
