"""A worker that has to go (its `run()` cancelled) stops its bodies and hands their jobs back
unharmed, as a drain does at its deadline; a shielded section of a body still finishes first.
What it cannot hand back within HAND_BACK_MS is torn down without settling: its lease hands it
to another worker."""

from __future__ import annotations

import asyncio

import anyio
import anyio.lowlevel
import pytest

from engine import JobRegistry, Jobs, ManualClock, Worker
from engine.drivers.memory import MemoryDriver
from engine.testing.blocked import wait_all_tasks_blocked
from engine.worker_hand_back import HAND_BACK_MS
from tests.support.worker_jobs import Item, SlowAcks, keyed_job


def worker_for(jobs: Jobs) -> Worker:
    return Worker(jobs, concurrency=2, scheduler=False, outbox_relay=False)


async def test_a_cancelled_body_finishes_its_shielded_section_then_goes_back_unharmed(
    clock: ManualClock, registry: JobRegistry
) -> None:
    jobs = Jobs(MemoryDriver(clock), registry=registry, clock=clock)
    gate = anyio.Event()
    shielded_done: list[int] = []
    after_shield: list[int] = []

    async def charge(item: Item) -> None:
        with anyio.CancelScope(shield=True):
            await gate.wait()
            shielded_done.append(item.n)
        await anyio.lowlevel.checkpoint()  # the cancellation lands here, once out of the shield
        after_shield.append(item.n)

    enqueued = await jobs.enqueue(keyed_job(registry, charge), {"n": 1})
    worker = worker_for(jobs)
    with anyio.fail_after(10):
        run = asyncio.create_task(worker.run())
        await wait_all_tasks_blocked()
        run.cancel()
        await wait_all_tasks_blocked()
        assert not run.done()  # waiting for the shield, not past it
        gate.set()
        with pytest.raises(asyncio.CancelledError):
            await run
    assert shielded_done == [1] and after_shield == []
    record = await jobs.get(enqueued.id)
    assert (record.state, record.attempt) == ("ready", 0)  # handed back, no attempt spent


async def test_an_ack_on_its_way_may_commit_while_a_cancelled_worker_goes(
    clock: ManualClock, registry: JobRegistry
) -> None:
    driver = SlowAcks(clock)
    jobs = Jobs(driver, registry=registry, clock=clock)
    enqueued = await jobs.enqueue(keyed_job(registry), {"n": 1})
    worker = worker_for(jobs)
    with anyio.fail_after(10):
        run = asyncio.create_task(worker.run())
        await wait_all_tasks_blocked()
        assert driver.waiting == [enqueued.id]
        run.cancel()
        await wait_all_tasks_blocked()
        assert not run.done()  # the result is in hand: its write is given time to commit
        driver.gate.set()
        with pytest.raises(asyncio.CancelledError):
            await run
    assert worker.in_flight == 0
    assert (await jobs.get(enqueued.id)).state == "done"


async def test_a_job_torn_down_while_its_ack_commits_is_left_to_its_lease(
    clock: ManualClock, registry: JobRegistry
) -> None:
    driver = SlowAcks(clock)
    jobs = Jobs(driver, registry=registry, clock=clock)
    enqueued = await jobs.enqueue(keyed_job(registry), {"n": 1})
    worker = worker_for(jobs)
    with anyio.fail_after(10):
        run = asyncio.create_task(worker.run())
        await wait_all_tasks_blocked()
        assert driver.waiting == [enqueued.id]
        run.cancel()
        await wait_all_tasks_blocked()
        clock.advance(HAND_BACK_MS)  # the ack never commits: the hand-back gives up on it
        with pytest.raises(asyncio.CancelledError):
            await run
    assert worker.in_flight == 0
    assert (await jobs.get(enqueued.id)).state == "running"


async def test_a_job_torn_down_before_its_task_started_never_runs(
    clock: ManualClock, registry: JobRegistry
) -> None:
    jobs = Jobs(MemoryDriver(clock), registry=registry, clock=clock)
    ran: list[int] = []

    async def body(item: Item) -> None:
        ran.append(item.n)

    await jobs.enqueue(keyed_job(registry, body), {"n": 1})
    worker = worker_for(jobs)
    (claimed,) = await jobs.driver.claim(worker.id, 1, 30_000)
    with anyio.fail_after(10):
        worker._start(worker._hold(claimed))  # the task exists; it has not run a line yet
        await worker._cancel_tasks()
    assert ran == []
    assert worker.in_flight == 0
