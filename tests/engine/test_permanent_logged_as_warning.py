"""A body's `Permanent` is the app's verdict that its input can never succeed, an expected
outcome: its `job.failed` line is one WARNING naming the job and the app's message, with no
traceback. An unexpected exception that runs out of attempts keeps its ERROR line and traceback.
Before, a Permanent was logged as a crash: a full traceback at ERROR."""

from __future__ import annotations

import logging

import pytest

from engine import JobContext, JobRegistry, Jobs, ManualClock, Permanent, Retry, Worker, job
from engine.drivers.memory import MemoryDriver
from tests.support.worker_jobs import Item

pytestmark = pytest.mark.drivers("memory", reason="logging does not involve the database")


def _lookup(table: dict[str, int], key: str) -> int:
    return table[key]


async def test_a_permanent_is_one_warning_line_naming_the_job_and_its_message(
    clock: ManualClock, registry: JobRegistry, caplog: pytest.LogCaptureFixture
) -> None:
    jobs = Jobs(MemoryDriver(clock), registry=registry, clock=clock)

    @job(idempotency_key=lambda i: str(i.n), retry=Retry(attempts=3), registry=registry)
    async def charge(input: Item, ctx: JobContext) -> None:
        if input.n == 1:
            raise Permanent("card 4242 declined")
        _lookup({}, "x")

    declined = await jobs.enqueue(charge, {"n": 1})
    crashed = await jobs.enqueue(charge, {"n": 2})
    with caplog.at_level(logging.INFO, logger="mcp_jobs.worker"):
        worker = Worker(jobs, prune=False)
        await worker.run_until_idle()
        # Through its retries to dead: the crash's last line.
        for _ in range(2):
            clock.advance(3_600_000)
            await worker.run_until_idle()

    assert (await jobs.get(declined.id)).state == "failed"
    assert (await jobs.get(crashed.id)).state == "dead"
    worker_lines = [r for r in caplog.records if r.name == "mcp_jobs.worker"]
    (failed,) = [r for r in worker_lines if declined.id in r.getMessage()]
    assert failed.levelno == logging.WARNING, failed.levelname
    assert failed.exc_info is None and failed.exc_text is None
    line = failed.getMessage()
    assert line.startswith("job.failed ") and "\n" not in line
    assert 'name="charge"' in line and "card 4242 declined" in line, line
    job_fields = vars(failed)["job"]
    assert job_fields["permanent"] is True and job_fields["job_id"] == declined.id

    # The crash is still logged as one: its dead line at ERROR, with the body's traceback.
    (dead,) = [
        r for r in worker_lines if r.getMessage().startswith(f"job.dead job_id={crashed.id}")
    ]
    assert dead.levelno == logging.ERROR and dead.exc_info is not None
    assert isinstance(dead.exc_info[1], KeyError)
    assert "permanent" not in vars(dead)["job"]


async def test_at_debug_a_permanent_line_carries_its_traceback_as_a_retried_one_does(
    clock: ManualClock, registry: JobRegistry, caplog: pytest.LogCaptureFixture
) -> None:
    jobs = Jobs(MemoryDriver(clock), registry=registry, clock=clock)

    @job(idempotency_key=lambda i: str(i.n), registry=registry)
    async def charge(input: Item, ctx: JobContext) -> None:
        raise Permanent("card 4242 declined")

    declined = await jobs.enqueue(charge, {"n": 1})
    with caplog.at_level(logging.DEBUG, logger="mcp_jobs.worker"):
        await Worker(jobs, prune=False).run_until_idle()
    (failed,) = [r for r in caplog.records if r.getMessage().startswith("job.failed ")]
    assert declined.id in failed.getMessage() and failed.levelno == logging.WARNING
    assert failed.exc_info is not None and isinstance(failed.exc_info[1], Permanent)
