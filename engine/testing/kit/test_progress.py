"""Progress (engine/progress.py): `ctx.progress` is throttled to one write per interval, the last
value is stored by the run's end, a stale holder writes nothing, and the value survives the ack
and a retry (until the new attempt reports)."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from engine import JobContext, JobRegistry, Jobs, ManualClock, Retry, Worker, job
from engine.drivers import open_driver
from engine.drivers.base import PROGRESS
from engine.errors import JobNotFoundError, JobsError
from engine.progress import PROGRESS_INTERVAL_MS, ProgressReporter
from engine.testing.blocked import wait_all_tasks_blocked
from schemas.progress import Progress

LEASE_MS = 30_000


class Item(BaseModel):
    n: int


@pytest.fixture(autouse=True)
def offers_progress(jobs: Jobs) -> None:
    # Optional capability (engine/drivers/base.py): a driver without it is not held to this.
    if not PROGRESS.offered_by(jobs.driver):
        pytest.skip(f"the {jobs.driver.kind} driver keeps no progress")


class Writes:
    """Every `save_progress` the driver was asked for, and a bounded wait for the next."""

    def __init__(self, jobs: Jobs) -> None:
        self.seen: list[Progress] = []
        self._arrived = anyio.Event()
        original = jobs.driver.save_progress  # type: ignore[attr-defined]

        async def recording(job_id: str, token: str, progress: Progress) -> bool:
            written: bool = await original(job_id, token, progress)
            self.seen.append(progress)
            self._arrived.set()
            return written

        jobs.driver.save_progress = recording  # type: ignore[attr-defined]

    async def reach(self, count: int) -> None:
        with anyio.fail_after(10):
            while len(self.seen) < count:
                await self._arrived.wait()
                self._arrived = anyio.Event()


async def test_reports_inside_the_interval_write_once_then_the_last_value(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    writes = Writes(jobs)
    reported, go_on = anyio.Event(), anyio.Event()

    @job(idempotency_key=lambda i: f"c:{i.n}", registry=registry)
    async def crunch(input: Item, ctx: JobContext) -> str:
        ctx.progress(1, 10, "one")
        await wait_all_tasks_blocked()  # the first report's write goes out now
        ctx.progress(2, 10, "two")
        ctx.progress(3, 10, "three")
        reported.set()
        await go_on.wait()
        ctx.progress(4, 10, "four")  # inside the next interval: written by the run's end
        return "ok"

    r = await jobs.enqueue(crunch, {"n": 1})
    started = clock.now_ms()
    async with anyio.create_task_group() as tg:
        tg.start_soon(Worker(jobs).run_until_idle)
        await writes.reach(1)
        await reported.wait()
        await wait_all_tasks_blocked()
        # Three reports inside one interval: one write, the first value.
        assert [p.done for p in writes.seen] == [1]
        stored = (await jobs.get(r.id)).progress
        assert stored == Progress(done=1, total=10, message="one", at=started, attempt=1)

        clock.advance(PROGRESS_INTERVAL_MS)
        await writes.reach(2)  # the interval passed: the latest value, not each one
        assert [p.message for p in writes.seen] == ["one", "three"]
        progress = (await jobs.get(r.id)).progress
        assert progress is not None and (progress.done, progress.message) == (3, "three")
        go_on.set()

    assert [p.done for p in writes.seen] == [1, 3, 4]
    record = await jobs.get(r.id)
    assert record.state == "done" and record.output == "ok"
    # Kept through the ack: a finished job shows where it ended.
    assert record.progress is not None
    assert (record.progress.done, record.progress.total, record.progress.message) == (4, 10, "four")


async def test_a_job_that_never_reports_writes_nothing(jobs: Jobs, registry: JobRegistry) -> None:
    writes = Writes(jobs)

    @job(idempotency_key=lambda i: f"q:{i.n}", registry=registry)
    async def quiet(input: Item, ctx: JobContext) -> None:
        return None

    r = await jobs.enqueue(quiet, {"n": 1})
    await Worker(jobs).run_until_idle()
    assert writes.seen == []
    record = await jobs.get(r.id)
    assert record.state == "done" and record.progress is None


async def test_a_stale_holder_writes_no_progress_and_its_job_does_not_fail(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    @job(idempotency_key=lambda i: f"s:{i.n}", registry=registry)
    async def slow(input: Item, ctx: JobContext) -> None:
        return None

    r = await jobs.enqueue(slow, {"n": 1})
    (stale,) = await jobs.driver.claim("doomed", 1, LEASE_MS)
    clock.advance(LEASE_MS)
    (fresh,) = await jobs.driver.claim("rescuer", 1, LEASE_MS)
    store = jobs.driver
    assert isinstance(store, PROGRESS.protocol)
    value = Progress(done=1, total=2, message="late", at=clock.now_ms(), attempt=1)
    assert await store.save_progress(r.id, stale.token, value) is False
    assert (await jobs.get(r.id)).progress is None

    # Through the reporter, as a body would: no write, and no error raised to the body.
    late = ProgressReporter(jobs.driver, clock, r.id, stale.token, 1)
    late.report(1, 2, "late")
    await late.finish()
    assert (await jobs.get(r.id)).progress is None

    mine = value.model_copy(update={"message": "mine", "attempt": 2})
    assert await store.save_progress(r.id, fresh.token, mine) is True
    assert (await jobs.get(r.id)).progress == mine


async def test_a_stale_holder_in_another_process_writes_no_progress(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock, database_url: str
) -> None:
    @job(idempotency_key=lambda i: f"p:{i.n}", registry=registry)
    async def slow(input: Item, ctx: JobContext) -> None:
        return None

    r = await jobs.enqueue(slow, {"n": 1})
    opened = open_driver(database_url, clock=clock)
    try:
        await opened.migrate()
        try:
            await opened.get(r.id)
            other = opened
        except JobNotFoundError:
            other = jobs.driver  # a driver whose database lives in one process: no second one
        (stale,) = await other.claim("doomed", 1, LEASE_MS)
        clock.advance(LEASE_MS)
        (fresh,) = await jobs.driver.claim("rescuer", 1, LEASE_MS)
        value = Progress(done=5, total=None, message=None, at=clock.now_ms(), attempt=1)
        assert isinstance(other, PROGRESS.protocol)
        assert await other.save_progress(r.id, stale.token, value) is False
        assert (await jobs.get(r.id)).progress is None
        assert await other.save_progress(r.id, fresh.token, value) is True  # the token decides
        assert (await jobs.get(r.id)).progress == value
    finally:
        await opened.close()


async def test_a_retry_keeps_the_last_progress_until_the_new_attempt_reports(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    reported_again = anyio.Event()
    go_on = anyio.Event()

    @job(
        idempotency_key=lambda i: f"r:{i.n}",
        retry=Retry(attempts=2, base_delay=1.0),
        registry=registry,
    )
    async def flaky(input: Item, ctx: JobContext) -> None:
        if ctx.attempt == 1:
            ctx.progress(5, 10, "halfway")
            raise RuntimeError("carrier API down")
        await go_on.wait()
        ctx.progress(7, 10, "again")
        reported_again.set()

    r = await jobs.enqueue(flaky, {"n": 1})
    worker = Worker(jobs)
    await worker.run_until_idle()
    failed = await jobs.get(r.id)
    assert failed.state == "delayed" and failed.progress is not None
    assert (failed.progress.done, failed.progress.attempt) == (5, 1)

    clock.advance(1_000)
    async with anyio.create_task_group() as tg:
        tg.start_soon(worker.run_until_idle)
        with anyio.fail_after(10):
            while (await jobs.get(r.id)).state != "running":
                await wait_all_tasks_blocked()
        running = await jobs.get(r.id)
        # The new attempt has not reported: the last value stays, saying which attempt it is.
        assert running.attempt == 2 and running.progress is not None
        assert (running.progress.done, running.progress.attempt) == (5, 1)
        go_on.set()
    done = await jobs.get(r.id)
    assert done.state == "done" and done.progress is not None
    assert (done.progress.done, done.progress.message, done.progress.attempt) == (7, "again", 2)


async def test_reports_out_of_bounds_are_refused_to_the_body(
    jobs: Jobs, registry: JobRegistry
) -> None:
    refused: list[tuple[str, Any]] = []
    bad: list[tuple[Any, Any, Any]] = [
        (-1, 10, None),
        (True, 10, None),
        (float("nan"), None, None),
        ("3", 10, None),
        (1, 0, None),
        (11, 10, None),
        (1, float("inf"), None),
        (1, 10, "x" * 201),
        (1, 10, 5),
        (1, 10, ""),
    ]

    @job(idempotency_key=lambda i: f"b:{i.n}", registry=registry)
    async def strict(input: Item, ctx: JobContext) -> None:
        for done, total, message in bad:
            try:
                ctx.progress(done, total, message)
            except JobsError as exc:
                refused.append((exc.code, (exc.details or {}).get("argument")))
        ctx.progress(10, 10, "x" * 200)  # done may equal total; 200 bytes is the bound
        ctx.progress(0.5)  # a fraction, total unknown

    r = await jobs.enqueue(strict, {"n": 1})
    await Worker(jobs).run_until_idle()
    assert [code for code, _ in refused] == ["INVALID_ARGUMENT"] * len(bad)
    assert [argument for _, argument in refused] == [
        "done", "done", "done", "done", "total", "done", "total", "message", "message", "message",
    ]  # fmt: skip
    record = await jobs.get(r.id)
    assert record.state == "done" and record.progress is not None
    assert (record.progress.done, record.progress.total) == (0.5, None)
