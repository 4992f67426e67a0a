"""A worker slot is held by a job's body, not by the commit of its result.

A finished body's ack may still be on its way to the database; the next job starts meanwhile,
and at most `concurrency` such settle writes are outstanding at once."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from engine import JobRegistry, Jobs, ManualClock, Worker
from engine.drivers.memory import MemoryDriver
from engine.testing.blocked import wait_all_tasks_blocked
from tests.support.worker_jobs import SlowAcks, keyed_job, recording_job


@pytest.mark.parametrize("prefetch", [0, 1])
async def test_the_next_body_runs_while_the_previous_ack_commits(
    clock: ManualClock, registry: JobRegistry, prefetch: int
) -> None:
    driver = SlowAcks(clock)
    jobs = Jobs(driver, registry=registry, clock=clock)
    work, started = recording_job(registry)
    a, b, c = [await jobs.enqueue(work, {"n": n}) for n in (1, 2, 3)]
    worker = Worker(jobs, concurrency=1, prefetch=prefetch, scheduler=False, outbox_relay=False)
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(worker.run)
            await wait_all_tasks_blocked()
            # One slot: job 1's body ran, its ack waits, and job 2's body ran anyway.
            assert started == [1, 2]
            # Job 1's ack is in the driver; job 2's queues behind it in the settler (one
            # flush of a kind in flight at a time) — both outstanding.
            assert driver.waiting == [a.id]
            assert (await jobs.get(a.id)).state == "running"  # not acked yet
            # Two writes outstanding for one slot is the bound: job 3 waits for a commit, in
            # the queue, or claimed ahead when the worker may hold one that waits.
            assert worker.in_flight == 2 + prefetch
            assert (await jobs.get(c.id)).state == ("running" if prefetch else "ready")
            driver.gate.set()
            await wait_all_tasks_blocked()
            assert started == [1, 2, 3] and worker.in_flight == 0
            worker.stop()
    assert [(await jobs.get(r.id)).state for r in (a, b, c)] == ["done", "done", "done"]


class CountedClaims(MemoryDriver):
    def __init__(self, clock: ManualClock) -> None:
        super().__init__(clock)
        self.claims: list[int] = []  # how many jobs each claim returned

    async def claim(self, *args: Any, **kwargs: Any) -> Any:
        batch = await super().claim(*args, **kwargs)
        self.claims.append(len(batch))
        return batch


async def test_a_finished_job_does_not_send_an_idle_worker_back_to_an_empty_queue(
    clock: ManualClock, registry: JobRegistry
) -> None:
    # The claim that found room to spare already said the queue was empty; a freed slot makes
    # no work. The next claim waits for a wake-up (an enqueue) or the poll.
    driver = CountedClaims(clock)
    jobs = Jobs(driver, registry=registry, clock=clock)
    work = keyed_job(registry)

    worker = Worker(jobs, concurrency=4, scheduler=False, outbox_relay=False)
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(worker.run)
            await wait_all_tasks_blocked()
            assert driver.claims == [0]  # idle: one claim found nothing
            a = await jobs.enqueue(work, {"n": 1})
            await wait_all_tasks_blocked()
            assert (await jobs.get(a.id)).state == "done"
            assert driver.claims == [0, 1]  # woken by the enqueue; no claim after the job ended
            b = await jobs.enqueue(work, {"n": 2})
            await wait_all_tasks_blocked()
            assert (await jobs.get(b.id)).state == "done" and driver.claims == [0, 1, 1]
            worker.stop()
