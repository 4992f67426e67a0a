"""A worker whose `run()` is cancelled (the usual asyncio shutdown: `task.cancel()`, a
`wait_for` that times out) hands back what it holds as a stop does at its drain deadline: the
job it was running and those it claimed ahead go back ready, no attempt spent. Left to their
leases they would count an attempt each time, and three restarts would make a job dead."""

from __future__ import annotations

import asyncio

import anyio
import pytest

from engine import JobRegistry, Jobs, Worker
from engine.testing.observe import Recorder
from tests.support.gated_job import Gated, until


async def test_a_cancelled_run_hands_its_running_job_back_ready_with_no_attempt_spent(
    jobs: Jobs, registry: JobRegistry
) -> None:
    gated = Gated(registry)
    enqueued = await jobs.enqueue(gated.job, {"n": 1})
    before = await jobs.get(enqueued.id)
    recorder = Recorder()
    worker = Worker(jobs, concurrency=1, listeners=[recorder])
    with anyio.fail_after(20):
        run = asyncio.create_task(worker.run())
        await gated.first_started.wait()
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
    record = await jobs.get(enqueued.id)
    assert (record.state, record.attempt, record.last_error) == ("ready", before.attempt, None)
    assert recorder.kinds(enqueued.id)[-1] == "handed_back"
    assert gated.finished == [] and worker.in_flight == 0


async def test_a_cancelled_run_hands_back_the_jobs_it_claimed_ahead_too(
    jobs: Jobs, registry: JobRegistry
) -> None:
    gated = Gated(registry)
    enqueued = [await jobs.enqueue(gated.job, {"n": n}) for n in range(3)]
    worker = Worker(jobs, concurrency=1, prefetch=2)
    worker.plan.body_finished(0)  # a worker that has timed its bodies claims ahead
    with anyio.fail_after(20):
        run = asyncio.create_task(worker.run())
        await until(lambda: worker.in_flight == 3)
        assert gated.started == [0]  # one runs; two wait in the worker
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
    for record in [await jobs.get(r.id) for r in enqueued]:
        assert (record.state, record.attempt, record.last_error) == ("ready", 0, None)


async def test_a_worker_cancelled_three_times_over_still_has_every_attempt_left(
    jobs: Jobs, registry: JobRegistry
) -> None:
    """Three deploys that each cancel the worker mid-job: the job is not dead, and runs once."""
    gated = Gated(registry)
    enqueued = await jobs.enqueue(gated.job, {"n": 1})
    with anyio.fail_after(15):
        for _ in range(3):
            gated.first_started.clear()
            run = asyncio.create_task(Worker(jobs, concurrency=1).run())
            await gated.first_started.wait()
            run.cancel()
            with pytest.raises(asyncio.CancelledError):
                await run
        gated.release.set()
        worker = Worker(jobs, concurrency=1)
        async with anyio.create_task_group() as tg:
            tg.start_soon(worker.run)
            await until(lambda: gated.finished == [1])
            worker.stop()
    record = await jobs.get(enqueued.id)
    assert (record.state, record.attempt) == ("done", 1)
