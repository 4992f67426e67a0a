"""One run of a worker at a time: a second `run()`, `start()`, `async with` or `run_until_idle()`
while it runs is refused (WORKER_ALREADY_RUNNING) and leaves the run going on as it was; once
stopped, the worker starts again."""

from __future__ import annotations

from typing import Literal

import anyio
import anyio.lowlevel
import pytest

from engine import JobRegistry, Jobs, Worker
from engine.errors import WorkerAlreadyRunningError
from tests.support.worker_jobs import Item, keyed_job

How = Literal["run", "start", "async with", "run_until_idle"]
HOWS: tuple[How, ...] = ("run", "start", "async with", "run_until_idle")


async def done(jobs: Jobs, n: int) -> None:
    """Enqueue item `n` and return once a worker has run it (bounded)."""
    queued = await jobs.enqueue("work", {"n": n})
    with anyio.fail_after(10):
        while (await jobs.get(queued.id)).state != "done":
            await anyio.lowlevel.checkpoint()


async def begin(worker: Worker, how: How) -> None:
    if how == "run":
        await worker.run()
    elif how == "start":
        await worker.start()
    elif how == "async with":
        async with worker:
            pass
    else:
        await worker.run_until_idle()


def assert_refused(
    refused: pytest.ExceptionInfo[WorkerAlreadyRunningError], worker: Worker
) -> None:
    error = refused.value
    assert error.code == "WORKER_ALREADY_RUNNING" and not error.retryable
    assert worker.id in error.cause and "default" in error.cause
    assert error.fix and "\n" not in error.fix


@pytest.mark.parametrize("first", ["run", "start"])
@pytest.mark.parametrize("second", HOWS)
async def test_a_second_run_of_a_running_worker_is_refused_and_the_first_runs_on(
    jobs: Jobs, registry: JobRegistry, first: How, second: How
) -> None:
    ran: list[int] = []

    async def body(item: Item) -> None:
        ran.append(item.n)

    keyed_job(registry, body)
    worker = Worker(jobs, prune=False)
    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            if first == "run":
                tg.start_soon(worker.run)
            else:
                await worker.start()
            await done(jobs, 1)
            with pytest.raises(WorkerAlreadyRunningError) as refused:
                await begin(worker, second)
            assert_refused(refused, worker)
            await done(jobs, 2)  # the run going on claims and runs as before
            await worker.stop()
        # Stopped, it runs again.
        async with worker:
            await done(jobs, 3)
    assert ran == [1, 2, 3]


async def test_two_starts_at_once_run_one_loop(jobs: Jobs, registry: JobRegistry) -> None:
    keyed_job(registry)
    worker = Worker(jobs, prune=False)
    outcomes: list[str] = []

    async def start() -> None:
        try:
            await worker.start()
            outcomes.append("started")
        except WorkerAlreadyRunningError:
            outcomes.append("refused")

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(start)
            tg.start_soon(start)
        assert sorted(outcomes) == ["refused", "started"]
        await done(jobs, 1)
        await worker.stop()


async def test_two_runs_waiting_for_one_drain_begin_one_loop(
    jobs: Jobs, registry: JobRegistry
) -> None:
    release, started = anyio.Event(), anyio.Event()

    async def body(item: Item) -> None:
        if item.n == 1:
            started.set()
            await release.wait()

    keyed_job(registry, body)
    worker = Worker(jobs, prune=False)
    outcomes: list[str] = []

    async def run() -> None:
        try:
            await worker.run()
            outcomes.append("ran")
        except WorkerAlreadyRunningError:
            outcomes.append("refused")

    with anyio.fail_after(30):
        await worker.start()
        queued = await jobs.enqueue("work", {"n": 1})
        await started.wait()
        worker.stop()  # draining: job 1 is still running
        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            tg.start_soon(run)
            release.set()
            while outcomes != ["refused"]:
                await anyio.lowlevel.checkpoint()
            await done(jobs, 2)  # the one loop that began runs
            await worker.stop()
        assert sorted(outcomes) == ["ran", "refused"]
        assert (await jobs.get(queued.id)).state == "done"
