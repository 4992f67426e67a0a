"""A worker whose stop has completed runs again when started again, a stop before any start
changes nothing, and a start during a drain waits for the drain and then runs."""

from __future__ import annotations

import logging

import anyio
import pytest

from engine import JobRegistry, Jobs, ManualClock, Worker
from engine.drivers.memory import MemoryDriver
from engine.testing.blocked import wait_all_tasks_blocked
from tests.support.worker_jobs import Item, keyed_job


def setup(clock: ManualClock, registry: JobRegistry) -> tuple[Jobs, list[int]]:
    ran: list[int] = []

    async def body(item: Item) -> None:
        ran.append(item.n)

    keyed_job(registry, body)
    return Jobs(MemoryDriver(clock), registry=registry, clock=clock), ran


async def settle(jobs: Jobs, job_id: str) -> str:
    """The job's state once the worker has had every chance to run it."""
    await wait_all_tasks_blocked()
    return (await jobs.get(job_id)).state


async def test_a_stop_before_any_start_does_not_keep_the_worker_from_running(
    clock: ManualClock, registry: JobRegistry
) -> None:
    jobs, ran = setup(clock, registry)
    worker = Worker(jobs, prune=False)
    with anyio.fail_after(10):
        await worker.stop()  # a `finally: await worker.stop()` that ran first
        await worker.start()
        queued = await jobs.enqueue("work", {"n": 1})
        assert await settle(jobs, queued.id) == "done"
        await worker.stop()
    assert ran == [1]


async def test_a_stopped_worker_started_again_claims_again(
    clock: ManualClock, registry: JobRegistry
) -> None:
    jobs, ran = setup(clock, registry)
    worker = Worker(jobs, prune=False)
    with anyio.fail_after(10):
        for n in (1, 2, 3):
            async with worker:
                queued = await jobs.enqueue("work", {"n": n})
                assert await settle(jobs, queued.id) == "done"
        await worker.start()
        queued = await jobs.enqueue("work", {"n": 4})
        assert await settle(jobs, queued.id) == "done"
        await worker.stop()
    assert ran == [1, 2, 3, 4]


async def test_run_after_a_completed_stop_runs_until_stopped_again(
    clock: ManualClock, registry: JobRegistry
) -> None:
    jobs, ran = setup(clock, registry)
    worker = Worker(jobs, prune=False)
    with anyio.fail_after(10):
        await worker.start()
        await worker.stop()
        async with anyio.create_task_group() as tg:
            tg.start_soon(worker.run)
            queued = await jobs.enqueue("work", {"n": 1})
            assert await settle(jobs, queued.id) == "done"
            await worker.stop()
    assert ran == [1]


async def test_a_start_during_a_drain_waits_for_it_then_runs(
    clock: ManualClock, registry: JobRegistry
) -> None:
    release, started = anyio.Event(), anyio.Event()
    ran: list[int] = []

    async def body(item: Item) -> None:
        ran.append(item.n)
        if item.n == 1:
            started.set()
            await release.wait()

    keyed_job(registry, body)
    jobs = Jobs(MemoryDriver(clock), registry=registry, clock=clock)
    worker = Worker(jobs, prune=False)
    with anyio.fail_after(10):
        await worker.start()
        first = await jobs.enqueue("work", {"n": 1})
        await started.wait()
        worker.stop()  # draining: job 1 is still running
        async with anyio.create_task_group() as tg:
            tg.start_soon(worker.start)
            await wait_all_tasks_blocked()
            assert (await jobs.get(first.id)).state == "running"
            release.set()
        assert await settle(jobs, first.id) == "done"
        second = await jobs.enqueue("work", {"n": 2})
        assert await settle(jobs, second.id) == "done"
        await worker.stop()
    assert ran == [1, 2]


async def test_a_worker_with_no_jobs_to_claim_says_so_when_it_starts(
    clock: ManualClock, registry: JobRegistry, caplog: pytest.LogCaptureFixture
) -> None:
    jobs = Jobs(MemoryDriver(clock), registry=registry, clock=clock)
    with caplog.at_level(logging.WARNING, logger="mcp_jobs.worker"), anyio.fail_after(10):
        async with Worker(jobs, prune=False):
            pass
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("no jobs registered" in message for message in warned), warned
