"""A run whose settling write fails for a while (the database away, its disk full) keeps its
outcome and writes it again until it commits: it was logged with a traceback per job and left
`running`, to run a second time once its lease ran out."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

import anyio
import pytest

from engine import JobRegistry, Jobs, ManualClock, Retry, Worker, job
from engine.context import JobContext
from engine.driver_errors import StorageFullError
from engine.drivers.base import AckWrite, StepWrite
from engine.drivers.memory import MemoryDriver
from engine.errors import JobOutputInvalidError, JobsError
from engine.testing.blocked import wait_all_tasks_blocked
from schemas.jobs import JobRecord, NackOptions
from tests.support.worker_jobs import Item

FULL = StorageFullError("sqlite", "/var/lib/jobs", "SQLITE_FULL: database or disk is full")


class FailingSettles(MemoryDriver):
    """Its first `fails` acks and nacks raise `error`; `tries` counts every one."""

    def __init__(self, clock: ManualClock, fails: int, error: JobsError = FULL) -> None:
        super().__init__(clock)
        self.fails, self.error, self.tries = fails, error, 0

    def _fail(self) -> None:
        self.tries += 1
        if self.fails > 0:
            self.fails -= 1
            raise self.error

    async def ack_many(self, writes: Sequence[AckWrite]) -> list[JobsError | None]:
        self._fail()
        return await super().ack_many(writes)

    async def nack(self, job_id: str, token: str, options: NackOptions) -> JobRecord:
        self._fail()
        return await super().nack(job_id, token, options)


class FailingSteps(FailingSettles):
    """Its first `fails` step writes raise `error`; its settles go through."""

    async def save_steps_many(self, writes: Sequence[StepWrite]) -> list[JobsError | None]:
        self._fail()
        return await super().save_steps_many(writes)

    async def ack_many(self, writes: Sequence[AckWrite]) -> list[JobsError | None]:
        return await MemoryDriver.ack_many(self, writes)


async def _run_until_settled(worker: Worker, clock: ManualClock, driver: FailingSettles) -> None:
    """Run `worker` and move the clock past each pause between tries until none fails."""
    with anyio.fail_after(10):
        run = asyncio.create_task(worker.run())
        while True:
            await wait_all_tasks_blocked()
            if driver.fails == 0 and worker.in_flight == 0:
                break
            clock.advance(1_000)  # the pause between tries is at most a second
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run


def _worker(jobs: Jobs) -> Worker:
    return Worker(jobs, concurrency=2, scheduler=False, outbox_relay=False, prune=False)


async def test_an_ack_that_fails_for_a_while_is_written_again_and_the_job_runs_once(
    clock: ManualClock, registry: JobRegistry, caplog: pytest.LogCaptureFixture
) -> None:
    driver = FailingSettles(clock, fails=3)
    jobs = Jobs(driver, registry=registry, clock=clock)
    ran: list[int] = []

    @job(name="charge", idempotency_key=lambda i: str(i.n), registry=registry)
    async def charge(item: Item, ctx: JobContext) -> dict[str, int]:
        ran.append(item.n)
        return {"charged": item.n}

    enqueued = await jobs.enqueue(charge, Item(n=1))
    with caplog.at_level(logging.INFO, logger="mcp_jobs.worker"):
        await _run_until_settled(_worker(jobs), clock, driver)
    record = await jobs.get(enqueued.id)
    assert (record.state, record.attempt, record.output) == ("done", 1, {"charged": 1})
    assert ran == [1] and driver.tries == 4
    lines = [r.getMessage() for r in caplog.records if enqueued.id in r.getMessage()]
    assert len(lines) == 2 and "STORAGE_FULL" in lines[0] and lines[1].endswith("is written")
    assert not any(r.exc_info for r in caplog.records)  # one line each, no traceback


async def test_a_failed_runs_retry_that_fails_to_be_written_is_written_again(
    clock: ManualClock, registry: JobRegistry
) -> None:
    driver = FailingSettles(clock, fails=2)
    jobs = Jobs(driver, registry=registry, clock=clock)

    @job(
        name="flaky",
        idempotency_key=lambda i: str(i.n),
        registry=registry,
        retry=Retry(attempts=3, backoff="fixed", base_delay=60),
    )
    async def flaky(item: Item, ctx: JobContext) -> None:
        raise RuntimeError("the card network timed out")

    enqueued = await jobs.enqueue(flaky, Item(n=1))
    await _run_until_settled(_worker(jobs), clock, driver)
    record = await jobs.get(enqueued.id)
    assert (record.state, record.attempt) == ("delayed", 1)
    assert record.last_error is not None and "card network" in record.last_error.cause


async def test_an_output_the_database_refuses_for_good_still_fails_the_job(
    clock: ManualClock, registry: JobRegistry
) -> None:
    """Not a failure that passes: no second try, the job failed as before."""
    refused = JobOutputInvalidError("charge", "the job", "$", "a string holding a NUL character")
    driver = FailingSettles(clock, fails=1, error=refused)
    jobs = Jobs(driver, registry=registry, clock=clock)

    @job(name="charge", idempotency_key=lambda i: str(i.n), registry=registry)
    async def charge(item: Item, ctx: JobContext) -> None: ...

    enqueued = await jobs.enqueue(charge, Item(n=1))
    await _run_until_settled(_worker(jobs), clock, driver)
    assert (await jobs.get(enqueued.id)).state == "failed"
    assert driver.tries == 2  # the refused ack, then the nack that fails the job


async def test_a_completed_step_whose_write_fails_for_a_while_is_written_again_not_rerun(
    clock: ManualClock, registry: JobRegistry
) -> None:
    """Raised into the body, the failure burned an attempt, and the retry ran the step's side
    effect a second time (its result was never stored)."""
    driver = FailingSteps(clock, fails=2)
    jobs = Jobs(driver, registry=registry, clock=clock)
    charged: list[int] = []

    async def charge_card(n: int) -> str:
        charged.append(n)
        return f"ch_{n}"

    @job(name="order", idempotency_key=lambda i: str(i.n), registry=registry)
    async def order(item: Item, ctx: JobContext) -> str:
        return str(await ctx.step.run("charge", charge_card, item.n))

    enqueued = await jobs.enqueue(order, Item(n=7))
    await _run_until_settled(_worker(jobs), clock, driver)
    record = await jobs.get(enqueued.id)
    assert (record.state, record.attempt, record.output, charged) == ("done", 1, "ch_7", [7])
