"""A heartbeat that runs far behind its time says why a lease may have run out: the event loop
was blocked (a body running blocking code). Before, the worker logged `job.lease_lost` and the
job ran again on another worker, with nothing naming the cause, and nothing in the job's own
history (inspect_job) where an agent asking why it ran again looks."""

from __future__ import annotations

import asyncio
import logging

import anyio
import pytest

from engine import JobRegistry, Jobs, ManualClock, Worker
from engine.drivers.memory import MemoryDriver
from engine.testing.blocked import wait_all_tasks_blocked
from schemas.events import EventRecord
from tests.support.worker_jobs import Item, keyed_job

LATE = "lease heartbeat ran"


async def test_a_heartbeat_far_behind_its_time_names_the_jobs_that_were_running(
    clock: ManualClock, registry: JobRegistry, caplog: pytest.LogCaptureFixture
) -> None:
    jobs = Jobs(MemoryDriver(clock), registry=registry, clock=clock)
    gate = anyio.Event()

    async def body(item: Item) -> None:
        await gate.wait()

    enqueued = await jobs.enqueue(keyed_job(registry, body), {"n": 1})
    worker = Worker(
        jobs, concurrency=1, lease_ms=3_000, scheduler=False, outbox_relay=False, prune=False
    )
    with anyio.fail_after(10), caplog.at_level(logging.WARNING, logger="mcp_jobs.worker"):
        run = asyncio.create_task(worker.run())
        await wait_all_tasks_blocked()
        for _ in range(4):  # each beat on its time (a third of the lease): nothing said
            clock.advance(1_000)
            await wait_all_tasks_blocked()
        assert LATE not in caplog.text
        clock.advance(10_000)  # as a loop blocked for ten seconds finds the time on waking
        await wait_all_tasks_blocked()
        gate.set()
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
    (line,) = [r.getMessage() for r in caplog.records if LATE in r.getMessage()]
    assert "ran 9.0 s late (a lease is 3.0 s)" in line, line
    assert f"{enqueued.id} (work)" in line and "anyio.to_thread.run_sync" in line
    # The job's history says it too, for whoever reads the job rather than the worker's log.
    (event,) = [e for e in (await jobs.trace(enqueued.id)).events if e.kind == "heartbeat_late"]
    assert event.actor == worker.id
    assert event.data is not None
    assert (event.data["late_ms"], event.data["lease_ms"]) == (9_000, 3_000)
    assert "event loop was blocked" in event.data["cause"]
    assert "anyio.to_thread.run_sync" in event.data["cause"]


class SlowNotes(MemoryDriver):
    """A driver whose late-heartbeat events wait for `gate`: a database slow to take them."""

    def __init__(self, clock: ManualClock) -> None:
        super().__init__(clock)
        self.gate = anyio.Event()

    async def record_event(self, event: EventRecord) -> None:
        if event.kind == "heartbeat_late":
            await self.gate.wait()
        await super().record_event(event)


async def test_each_blocking_body_is_named_though_the_note_before_is_still_written(
    clock: ManualClock, registry: JobRegistry, caplog: pytest.LogCaptureFixture
) -> None:
    """Two bodies block the loop one after the other, and the first one's note is still on its
    way when the second blocks. The watch went back to sleep at once, so it saw the second too
    (it measured only its sleeps, and was inside the first note's write when the second fell)."""
    driver = SlowNotes(clock)
    jobs = Jobs(driver, registry=registry, clock=clock)

    async def body(item: Item) -> None:
        clock.advance(45_000)  # 45 s pass while the loop runs nothing else (the lease is 60)

    work = keyed_job(registry, body)
    first, second = [await jobs.enqueue(work, {"n": n}) for n in (1, 2)]
    worker = Worker(
        jobs,
        concurrency=1,
        prefetch=0,
        lease_ms=60_000,
        scheduler=False,
        outbox_relay=False,
        prune=False,
    )
    with anyio.fail_after(10), caplog.at_level(logging.WARNING, logger="mcp_jobs.worker"):
        run = asyncio.create_task(worker.run())
        await wait_all_tasks_blocked()
        assert [(await jobs.get(j.id)).state for j in (first, second)] == ["done", "done"]
        driver.gate.set()
        await wait_all_tasks_blocked()
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
    for job in (first, second):
        events = (await jobs.trace(job.id)).events
        (event,) = [e for e in events if e.kind == "heartbeat_late"]
        assert event.data is not None and event.data["late_ms"] == 25_000
