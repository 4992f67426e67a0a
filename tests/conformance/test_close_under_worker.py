"""`jobs.close()` while a worker on that client still runs (a lifespan that closes before it
stops) stops the worker first, as `stop()` would: its job in flight finishes and settles, or is
handed back at the drain deadline, instead of finishing with nowhere to settle and running again
when its lease ran out, an attempt spent. The worker's `run()` then raises DRIVER_CLOSED."""

from __future__ import annotations

import asyncio

import anyio
import pytest

from engine import JobRegistry, Jobs, ManualClock, Worker
from engine.driver_errors import DriverClosedError
from engine.testing.blocked import wait_all_tasks_blocked
from tests.support.gated_job import Gated


async def test_closing_the_client_under_its_worker_lets_the_job_in_flight_finish_and_settle(
    jobs: Jobs, second_jobs: Jobs, registry: JobRegistry
) -> None:
    gated = Gated(registry)
    enqueued = await jobs.enqueue(gated.job, {"n": 1})
    worker = Worker(jobs, concurrency=1)
    with anyio.fail_after(20):
        run = asyncio.create_task(worker.run())
        await gated.first_started.wait()
        closing = asyncio.create_task(jobs.close())
        await wait_all_tasks_blocked()
        assert not closing.done()  # it waits for the worker's drain
        gated.release.set()
        await closing
        with pytest.raises(DriverClosedError):
            await run
    record = await second_jobs.get(enqueued.id)
    assert (record.state, record.attempt) == ("done", 1)
    assert gated.finished == [1]


async def test_a_job_still_running_at_the_drain_deadline_of_a_close_goes_back_unharmed(
    jobs: Jobs, second_jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    gated = Gated(registry)
    enqueued = await jobs.enqueue(gated.job, {"n": 1})
    worker = Worker(jobs, concurrency=1, drain_ms=1_000)
    with anyio.fail_after(20):
        run = asyncio.create_task(worker.run())
        await gated.first_started.wait()
        closing = asyncio.create_task(jobs.close())
        await wait_all_tasks_blocked()
        clock.advance(1_000)
        await closing
        with pytest.raises(DriverClosedError):
            await run
    record = await second_jobs.get(enqueued.id)
    assert (record.state, record.attempt, record.last_error) == ("ready", 0, None)
    assert gated.finished == []
