"""A job claimed ahead waits for a slot at most WAIT_AHEAD_MS: then it goes back ready, its
attempt unspent, for a worker with a slot free (kept, it waited as long as the body ahead of it
ran, and a kill -9 meanwhile dead-lettered a job whose body never began). One the database does
not take back waits on under its lease: whose lease ran out is not started, as another worker
may have claimed (and run) it meanwhile; whose lease the heartbeat kept renewing starts however
long it waited. Runs on every driver (tests/redis and tests/nats re-export it)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from pydantic import BaseModel

from engine import JobContext, JobRegistry, Jobs, ManualClock, Worker, job
from engine.driver_errors import DriverUnavailableError
from engine.testing.blocked import wait_all_tasks_blocked
from engine.testing.observe import Recorder
from engine.worker_hand_back import WAIT_AHEAD_MS

LEASE_MS = 30_000
BEAT_MS = LEASE_MS // 3


class Task(BaseModel):
    n: int


async def until(done: Callable[[], bool]) -> None:
    """Let the worker run (its calls may be on a socket) until `done()`, for at most 10 s."""
    with anyio.fail_after(10):
        while not done():
            await anyio.lowlevel.checkpoint()


class TwoJobs:
    """Job 0 runs until `release`; job 1 (`waiting`) is claimed ahead behind it, one slot."""

    def __init__(self, jobs: Jobs, registry: JobRegistry) -> None:
        self.jobs = jobs
        self.release = anyio.Event()
        self.started: list[int] = []
        self.recorder = Recorder()

        @job(idempotency_key=lambda i: f"a:{i.n}", registry=registry)
        async def held(input: Task, ctx: JobContext) -> None:
            self.started.append(input.n)
            if input.n == 0:
                await self.release.wait()

        self.job = held
        self.worker = Worker(
            jobs, concurrency=1, prefetch=1, lease_ms=LEASE_MS, listeners=[self.recorder]
        )
        self.worker.plan.body_finished(0)  # timed a quick body: it claims ahead

    async def enqueue(self) -> str:
        """Both jobs; the id of the one that will wait."""
        return [(await self.jobs.enqueue(self.job, {"n": n})).id for n in range(2)][1]


async def past_the_lease(clock: ManualClock, beats: list[str]) -> None:
    """Move the clock past one lease a heartbeat interval at a time, letting each beat over
    both jobs end (`beats`: the job ids the heartbeat has been answered for, or refused) and
    the heartbeat sleep again."""
    for n in range(1, 5):
        clock.advance(BEAT_MS + 1)
        await until(lambda: len(beats) == 2 * n)  # noqa: B023 (awaited in this iteration)
        await wait_all_tasks_blocked()


async def test_a_job_whose_lease_ran_out_while_it_waited_is_not_started(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    two = TwoJobs(jobs, registry)
    waiting = await two.enqueue()
    beats: list[str] = []

    async def unreachable(job_id: str, *args: Any) -> Any:
        beats.append(job_id)
        raise DriverUnavailableError(jobs.driver.kind, "connection refused")

    async def refused(*args: Any) -> Any:
        raise DriverUnavailableError(jobs.driver.kind, "connection refused")

    async with anyio.create_task_group() as tg:
        tg.start_soon(two.worker.run)
        await until(lambda: two.worker.in_flight == 2)
        assert two.started == [0]  # job 1 waits in the worker for the slot
        # The database stops answering this worker: its leases are not renewed, nor is the
        # job that waits too long taken back.
        monkeypatch.setattr(jobs.driver, "heartbeat", unreachable)
        monkeypatch.setattr(jobs.driver, "nack", refused)
        await past_the_lease(clock, beats)
        monkeypatch.undo()
        # Another worker takes the expired lease over (and runs the job there).
        taken = await jobs.driver.claim("peer-worker", 2, LEASE_MS, None)
        assert waiting in {c.record.id for c in taken}
        two.release.set()
        event = await two.recorder.wait("lease_lost", waiting)
        await until(lambda: two.worker.in_flight == 0)
        two.worker.stop()
    assert two.started == [0]  # this worker never ran job 1's body
    assert event.reason == "lease ran out before it started"
    record = await jobs.get(waiting)
    assert (record.state, record.worker_id) == ("running", "peer-worker")  # the peer's to settle


async def test_a_job_whose_lease_was_renewed_while_it_waited_starts(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    two = TwoJobs(jobs, registry)
    waiting = await two.enqueue()
    beats: list[str] = []
    heartbeat = jobs.driver.heartbeat

    async def answered(job_id: str, *args: Any) -> Any:
        result = await heartbeat(job_id, *args)
        beats.append(job_id)
        return result

    async def refused(*args: Any) -> Any:
        raise DriverUnavailableError(jobs.driver.kind, "connection refused")

    monkeypatch.setattr(jobs.driver, "heartbeat", answered)
    monkeypatch.setattr(jobs.driver, "nack", refused)  # not taken back: it waits on
    async with anyio.create_task_group() as tg:
        tg.start_soon(two.worker.run)
        await until(lambda: two.worker.in_flight == 2)
        await past_the_lease(clock, beats)
        two.release.set()
        await two.recorder.wait("succeeded", waiting)
        two.worker.stop()
    assert two.started == [0, 1]
    assert "lease_lost" not in two.recorder.kinds()


async def test_a_job_that_waited_too_long_goes_back_with_its_attempt_unspent(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    two = TwoJobs(jobs, registry)
    waiting = await two.enqueue()
    async with anyio.create_task_group() as tg:
        tg.start_soon(two.worker.run)
        await until(lambda: two.worker.in_flight == 2)
        clock.advance(WAIT_AHEAD_MS - 1)
        await wait_all_tasks_blocked()
        assert two.worker.in_flight == 2  # not yet
        clock.advance(1)
        event = await two.recorder.wait("handed_back", waiting)
        await until(lambda: two.worker.in_flight == 1)
        record = await jobs.get(waiting)
        assert record is not None and (record.state, record.attempt) == ("ready", 0)
        # Not claimed back while the body ahead runs: the pace the claim went by misled.
        await wait_all_tasks_blocked()
        assert two.worker.in_flight == 1
        two.release.set()
        await two.recorder.wait("succeeded", waiting)
        two.worker.stop()
    assert two.started == [0, 1]
    assert event.reason is not None and "back for a worker with one" in event.reason
    record = await jobs.get(waiting)
    assert record is not None and (record.state, record.attempt) == ("done", 1)
