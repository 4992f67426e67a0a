"""Claiming ahead: with a backlog, a worker holds up to `prefetch` claimed jobs waiting for a slot.

They are the worker's (their leases are kept, a cancel reaches them) but no more bodies run than
`concurrency`, and a worker that stops hands them back as they were. A worker claims ahead once
it has timed a body (an untimed one claims for its free slots only); these tests time one at no
time with `paced`, as a worker that had just run a quick job would have."""

from __future__ import annotations

from collections.abc import Callable

import anyio
import anyio.lowlevel
from pydantic import BaseModel

from engine import JobContext, JobRegistry, Jobs, ManualClock, Worker, job
from engine.testing.observe import Recorder


class Task(BaseModel):
    n: int


class Bodies:
    """A job whose bodies wait for `release`, counting how many run at once."""

    def __init__(self, registry: JobRegistry) -> None:
        self.release = anyio.Event()
        self.started: list[int] = []
        self.running = 0
        self.most = 0

        @job(idempotency_key=lambda i: f"p:{i.n}", registry=registry)
        async def held(input: Task, ctx: JobContext) -> None:
            self.started.append(input.n)
            self.running += 1
            self.most = max(self.most, self.running)
            try:
                await self.release.wait()
            finally:
                self.running -= 1

        self.job = held


def paced(worker: Worker) -> Worker:
    worker.plan.body_finished(0)
    return worker


async def until(done: Callable[[], bool]) -> None:
    """Let the worker run (its claims may be on a socket) until `done()`, for at most 10 s."""
    with anyio.fail_after(10):
        while not done():
            await anyio.lowlevel.checkpoint()


async def test_a_backlog_is_claimed_ahead_but_no_more_bodies_run_than_slots(
    jobs: Jobs, registry: JobRegistry
) -> None:
    bodies = Bodies(registry)
    enqueued = [await jobs.enqueue(bodies.job, {"n": n}) for n in range(8)]
    worker = paced(Worker(jobs, concurrency=2, prefetch=2))
    async with anyio.create_task_group() as tg:
        tg.start_soon(worker.run)
        await until(lambda: worker.in_flight == 4)
        assert bodies.started == [0, 1]  # two run; two more wait in the worker
        states = [(await jobs.get(r.id)).state for r in enqueued]
        assert states.count("running") == 4 and states.count("ready") == 4
        bodies.release.set()
        await until(lambda: len(bodies.started) == 8 and worker.in_flight == 0)
        worker.stop()
    assert sorted(bodies.started) == list(range(8)) and bodies.most == 2
    assert {(await jobs.get(r.id)).state for r in enqueued} == {"done"}


async def test_a_stopping_worker_hands_back_what_it_claimed_ahead_unharmed(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    bodies = Bodies(registry)
    enqueued = [await jobs.enqueue(bodies.job, {"n": n}) for n in range(6)]
    queued_at = {r.id: (await jobs.get(r.id)).queued_at for r in enqueued}
    recorder = Recorder()
    worker = paced(Worker(jobs, concurrency=2, prefetch=2, listeners=[recorder]))
    async with anyio.create_task_group() as tg:
        tg.start_soon(worker.run)
        await until(lambda: worker.in_flight == 4)
        clock.advance(5)  # a hand-back that requeued "now" would move queued_at
        worker.stop()
        bodies.release.set()
    handed = [e for e in recorder.events if e.kind == "handed_back"]
    assert len(handed) == 2
    assert {e.reason for e in handed} == {"worker stopping before it started"}
    assert bodies.started == [0, 1]
    for event in handed:
        record = await jobs.get(event.job_id)
        assert (record.state, record.attempt, record.last_error) == ("ready", 0, None)
        assert record.queued_at == queued_at[record.id]  # still the oldest waiting work
    states = sorted([(await jobs.get(r.id)).state for r in enqueued])
    assert states == ["done", "done", "ready", "ready", "ready", "ready"]


async def test_a_job_cancelled_while_it_waits_for_a_slot_never_starts(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    bodies = Bodies(registry)
    enqueued = [await jobs.enqueue(bodies.job, {"n": n}) for n in range(3)]
    recorder = Recorder()
    # A heartbeat every 500 ms: the worker hears the cancel before the job has waited
    # WAIT_AHEAD_MS, past which it would go back unstarted anyway.
    worker = paced(Worker(jobs, concurrency=1, prefetch=2, listeners=[recorder], lease_ms=1_500))
    async with anyio.create_task_group() as tg:
        tg.start_soon(worker.run)
        await until(lambda: worker.in_flight == 3)
        waiting = enqueued[1]
        assert (await jobs.cancel(waiting.id, actor="test")).state == "cancelled"
        clock.advance(500)  # one heartbeat interval: the worker hears the cancel
        await until(lambda: worker._inflight[waiting.id].reason == "cancelled")
        bodies.release.set()
        event = await recorder.wait("cancelled", waiting.id)
        await recorder.wait("succeeded", enqueued[2].id)
        worker.stop()
    assert event.reason == "cancelled before it started"
    assert bodies.started == [0, 2]
    assert (await jobs.get(waiting.id)).state == "cancelled"
