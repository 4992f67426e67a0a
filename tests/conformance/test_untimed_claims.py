"""A worker that has not timed a body yet claims for its free slots only: it cannot tell a
millisecond job from a minute one, and jobs it claimed ahead would sit out a whole lease if it
died, while other workers stood idle. Once bodies are timed, short ones are claimed ahead."""

from __future__ import annotations

import anyio

from engine import JobRegistry, Jobs, Worker
from engine.testing.blocked import wait_all_tasks_blocked
from tests.support.gated_job import Gated, until


async def test_a_fresh_worker_holds_no_more_jobs_than_its_slots(
    jobs: Jobs, registry: JobRegistry
) -> None:
    gated = Gated(registry)
    enqueued = [await jobs.enqueue(gated.job, {"n": n}) for n in range(6)]
    worker = Worker(jobs, concurrency=2, prefetch=4)
    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            tg.start_soon(worker.run)
            await until(lambda: len(gated.started) == 2)
            await wait_all_tasks_blocked()  # claims ahead, were any made, have landed
            held = worker.in_flight
            states = [(await jobs.get(r.id)).state for r in enqueued]
            gated.release.set()
            await until(lambda: len(gated.finished) == 6 and worker.in_flight == 0)
            worker.stop()
    assert held == 2
    assert states.count("running") == 2 and states.count("ready") == 4
