"""Retries, dead letters, timeouts, cancellation, unknown names and drain (rules 7, 8, 11, 12)."""

from __future__ import annotations

import anyio
import pytest
from pydantic import BaseModel

from engine import JobContext, JobRegistry, Jobs, ManualClock, Permanent, Retry, Worker, job
from engine.errors import JobsError
from engine.retry import retry_schedule
from engine.testing.observe import Recorder


class Task(BaseModel):
    n: int


async def test_failures_follow_the_retry_schedule_then_dead_letter(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    policy = Retry(attempts=4, backoff="exponential", base_delay=2, max_delay=5)

    @job(idempotency_key=lambda i: f"t:{i.n}", retry=policy, registry=registry)
    async def flaky(input: Task, ctx: JobContext) -> None:
        raise ValueError(f"boom on attempt {ctx.attempt}")

    r = await jobs.enqueue(flaky, {"n": 1})
    worker = Worker(jobs)
    start = clock.now_ms()
    for expected_delay in retry_schedule(policy):  # [2000, 4000, 5000]
        assert await worker.run_until_idle() == 1
        record = await jobs.get(r.id)
        assert record.state == "delayed"
        assert record.run_at == clock.now_ms() + expected_delay
        clock.advance(expected_delay - 1)
        assert await worker.run_until_idle() == 0  # not a millisecond early
        clock.advance(1)
    assert await worker.run_until_idle() == 1
    record = await jobs.get(r.id)
    assert record.state == "dead" and record.attempt == 4
    assert record.last_error is not None
    assert (record.last_error.code, record.last_error.cause) == (
        "JOB_FAILED",
        "ValueError: boom on attempt 4",
    )
    assert clock.now_ms() - start == sum(retry_schedule(policy))
    trace = await jobs.trace(r.id)
    assert [e.kind for e in trace.events] == ["retried", "retried", "retried", "dead"]
    assert trace.retry_delays_ms == [2000, 4000, 5000]
    (stats,) = await jobs.stats()
    assert stats.dead == 1


async def test_permanent_failure_skips_the_remaining_attempts(
    jobs: Jobs, registry: JobRegistry
) -> None:
    @job(idempotency_key=lambda i: f"t:{i.n}", retry=Retry(attempts=5), registry=registry)
    async def refuses(input: Task, ctx: JobContext) -> None:
        raise Permanent("card declined")

    r = await jobs.enqueue(refuses, {"n": 1})
    await Worker(jobs).run_until_idle()
    record = await jobs.get(r.id)
    assert (record.state, record.attempt) == ("failed", 1)


async def test_a_job_past_its_timeout_is_cancelled_before_it_is_handed_back(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    """Rule 8: the body is stopped (cancel scope) — no second copy runs beside the retry."""
    started = anyio.Event()
    stopped: list[str] = []

    @job(
        idempotency_key=lambda i: f"t:{i.n}", timeout=5, retry=Retry(attempts=2), registry=registry
    )
    async def hangs(input: Task, ctx: JobContext) -> None:
        started.set()
        try:
            await anyio.Event().wait()
        except anyio.get_cancelled_exc_class():
            stopped.append("cancelled")
            raise

    r = await jobs.enqueue(hangs, {"n": 1})
    recorder = Recorder()
    worker = Worker(jobs, listeners=[recorder], lease_ms=60_000)
    async with anyio.create_task_group() as tg:
        tg.start_soon(worker.run_until_idle)
        with anyio.fail_after(10):
            await started.wait()
        clock.advance(5_000)
        event = await recorder.wait("retried", r.id)
    assert stopped == ["cancelled"]
    assert event.error is not None and event.error.startswith("JOB_TIMEOUT")
    record = await jobs.get(r.id)
    assert record.state == "delayed" and record.last_error is not None
    assert record.last_error.code == "JOB_TIMEOUT"


async def test_cancelling_a_running_job_stops_its_body_at_the_next_heartbeat(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    started = anyio.Event()
    stopped: list[str] = []

    @job(idempotency_key=lambda i: f"t:{i.n}", registry=registry)
    async def long_running(input: Task, ctx: JobContext) -> None:
        started.set()
        try:
            await anyio.Event().wait()
        except anyio.get_cancelled_exc_class():
            stopped.append("stopped")
            raise

    r = await jobs.enqueue(long_running, {"n": 1})
    recorder = Recorder()
    worker = Worker(jobs, listeners=[recorder], lease_ms=30_000)
    async with anyio.create_task_group() as tg:
        tg.start_soon(worker.run_until_idle)
        with anyio.fail_after(10):
            await started.wait()
        cancelled = await jobs.cancel(r.id, actor="test")
        assert cancelled.state == "cancelled"
        assert stopped == []  # told, not yet heard: it hears at the next heartbeat
        clock.advance(10_000)  # one heartbeat interval (lease / 3)
        await recorder.wait("cancelled", r.id)
    assert stopped == ["stopped"]
    record = await jobs.get(r.id)
    assert record.state == "cancelled"
    # Rule 11: never claimed again.
    clock.advance(3_600_000)
    assert await worker.run_until_idle() == 0


async def test_cancelled_is_terminal_and_a_plain_retry_does_not_resurrect_it(
    jobs: Jobs, registry: JobRegistry
) -> None:
    @job(idempotency_key=lambda i: f"t:{i.n}", registry=registry)
    async def noop(input: Task, ctx: JobContext) -> None:
        return None

    r = await jobs.enqueue(noop, {"n": 1})
    await jobs.cancel(r.id)
    assert await Worker(jobs).run_until_idle() == 0
    with pytest.raises(JobsError) as raised:
        await jobs.retry(r.id)
    assert raised.value.code == "JOB_NOT_RETRYABLE"
    assert raised.value.next_call is not None
    assert raised.value.next_call.arguments == {"job_id": r.id, "include_cancelled": True}
    with pytest.raises(JobsError) as again:
        await jobs.cancel(r.id)
    assert again.value.code == "JOB_NOT_CANCELLABLE"
    revived = await jobs.retry(r.id, include_cancelled=True, actor="ops")
    assert revived.state == "ready"
    assert await Worker(jobs).run_until_idle() == 1
    assert (await jobs.get(r.id)).state == "done"


async def test_retry_requeues_a_dead_job_and_resumes_its_run(
    jobs: Jobs, registry: JobRegistry
) -> None:
    ran: list[str] = []
    broken = {"yes": True}

    @job(idempotency_key=lambda i: f"t:{i.n}", retry=Retry(attempts=1), registry=registry)
    async def two_steps(input: Task, ctx: JobContext) -> None:
        await ctx.step.run("one", ran.append, "one")
        if broken["yes"]:
            raise RuntimeError("bug")
        await ctx.step.run("two", ran.append, "two")

    r = await jobs.enqueue(two_steps, {"n": 1})
    await Worker(jobs).run_until_idle()
    assert (await jobs.get(r.id)).state == "dead"
    broken["yes"] = False
    requeued = await jobs.retry(r.id, actor="ops")
    assert (requeued.state, requeued.attempt, requeued.run_id) == ("ready", 0, r.run_id)
    await Worker(jobs).run_until_idle()
    assert (await jobs.get(r.id)).state == "done"
    assert ran == ["one", "two"]  # step one was not run again
    events = (await jobs.trace(r.id)).events
    assert [(e.kind, e.actor) for e in events][-1] == ("requeued", "ops")


async def test_retry_refuses_a_live_job_and_a_key_taken_again(
    jobs: Jobs, registry: JobRegistry
) -> None:
    @job(idempotency_key=lambda i: f"t:{i.n}", retry=Retry(attempts=1), registry=registry)
    async def fails(input: Task, ctx: JobContext) -> None:
        raise RuntimeError("no")

    live = await jobs.enqueue(fails, {"n": 1})
    with pytest.raises(JobsError) as raised:
        await jobs.retry(live.id)
    assert raised.value.code == "JOB_NOT_RETRYABLE"
    await Worker(jobs).run_until_idle()
    assert (await jobs.get(live.id)).state == "dead"
    newer = await jobs.enqueue(fails, {"n": 1})
    assert not newer.deduped
    with pytest.raises(JobsError) as taken:
        await jobs.retry(live.id)
    assert taken.value.code == "JOB_DUPLICATE"
    assert (await jobs.get(live.id)).state == "dead"


async def test_retry_runs_a_delayed_job_now(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    """A delayed job, waiting for its run_at or for its next attempt, runs now when retried:
    ready at this instant, attempts from 0, the same run, its dedupe key still its own."""
    broken = {"yes": True}
    backoff = Retry(attempts=3, base_delay=600)

    @job(idempotency_key=lambda i: f"t:{i.n}", retry=backoff, registry=registry)
    async def flaky(input: Task, ctx: JobContext) -> None:
        if broken["yes"]:
            raise RuntimeError("not yet")

    later = await jobs.enqueue(flaky, {"n": 1}, delay=3600)
    assert later.state == "delayed"
    worker = Worker(jobs)
    assert await worker.run_until_idle() == 0
    now = await jobs.retry(later.id, actor="ops")
    assert (now.state, now.run_at, now.attempt, now.run_id) == (
        "ready",
        clock.now_ms(),
        0,
        later.run_id,
    )
    again = await jobs.enqueue(flaky, {"n": 1})
    assert (again.deduped, again.id) == (True, later.id)
    assert await worker.run_until_idle() == 1
    waiting = await jobs.get(later.id)
    assert (waiting.state, waiting.attempt) == ("delayed", 1)
    assert waiting.run_at > clock.now_ms()
    broken["yes"] = False
    assert (await jobs.retry(later.id)).state == "ready"
    assert await worker.run_until_idle() == 1  # the clock has not moved
    assert (await jobs.get(later.id)).state == "done"
    events = (await jobs.trace(later.id)).events
    assert [(e.actor, e.data) for e in events if e.kind == "requeued"] == [
        ("ops", {"from": "delayed"}),
        (None, {"from": "delayed"}),
    ]
    (stats,) = await jobs.stats()
    assert (stats.delayed, stats.ready, stats.dead, stats.failed) == (0, 0, 0, 0)


async def test_an_unknown_job_name_parks_without_burning_an_attempt(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    @job(idempotency_key=lambda i: f"t:{i.n}", registry=registry)
    async def elsewhere(input: Task, ctx: JobContext) -> None:
        return None

    r = await jobs.enqueue(elsewhere, {"n": 1})
    registry.remove("elsewhere")  # this worker's deploy does not know the name
    await Worker(jobs, queues=["default"]).run_until_idle()  # it serves the queue
    record = await jobs.get(r.id)
    assert (record.state, record.attempt) == ("suspended", 0)
    assert record.run_at == clock.now_ms() + 30_000
    (stats,) = await jobs.stats()
    assert (stats.ready, stats.suspended) == (0, 1)


async def test_drain_finishes_in_flight_work_and_hands_back_the_rest_unharmed(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    release = anyio.Event()
    started: list[int] = []
    all_started = anyio.Event()

    @job(idempotency_key=lambda i: f"t:{i.n}", registry=registry)
    async def slow(input: Task, ctx: JobContext) -> None:
        started.append(input.n)
        if len(started) == 2:
            all_started.set()
        if input.n == 1:
            await release.wait()  # finishes once the drain has begun
        else:
            await anyio.Event().wait()  # never finishes by itself

    one = await jobs.enqueue(slow, {"n": 1})
    two = await jobs.enqueue(slow, {"n": 2})
    recorder = Recorder()
    worker = Worker(jobs, concurrency=2, listeners=[recorder], drain_ms=20_000, lease_ms=60_000)
    async with anyio.create_task_group() as tg:
        tg.start_soon(worker.run)
        with anyio.fail_after(10):
            await all_started.wait()
        worker.stop()  # the drain begins: no more claims
        three = await jobs.enqueue(slow, {"n": 3})  # arrives during the drain: not claimed
        release.set()
        await recorder.wait("succeeded", one.id)
        clock.advance(20_000)  # the drain deadline
        await recorder.wait("handed_back", two.id)
    assert (await jobs.get(one.id)).state == "done"
    handed = await jobs.get(two.id)
    assert (handed.state, handed.attempt, handed.last_error) == ("ready", 0, None)
    assert (await jobs.get(three.id)).state == "ready"
    assert started == [1, 2]
    # Its body had begun: its history says it was handed back, with the attempt given back
    # (exploreY: attempt 0 beside completed steps, and nothing in its history).
    (back,) = [e for e in (await jobs.trace(two.id)).events if e.kind == "handed_back"]
    assert back.data == {"attempt": 1, "error": None}, back
    # Never started, or done: no such event.
    for other in (one.id, three.id):
        assert "handed_back" not in [e.kind for e in (await jobs.trace(other)).events]


async def test_an_idle_worker_wakes_for_new_work_without_a_poll(
    jobs: Jobs, registry: JobRegistry
) -> None:
    """The manual clock never advances here, so the poll timer cannot fire: only the driver's
    wake-up (in-process notify, or LISTEN/NOTIFY) can start these jobs."""

    @job(idempotency_key=lambda i: f"t:{i.n}", registry=registry)
    async def quick(input: Task, ctx: JobContext) -> int:
        return input.n

    recorder = Recorder()
    worker = Worker(jobs, concurrency=2, listeners=[recorder], poll_ms=3_600_000)
    async with anyio.create_task_group() as tg:
        tg.start_soon(worker.run)
        first = await jobs.enqueue(quick, {"n": 1})
        await recorder.wait("succeeded", first.id)
        second = await jobs.enqueue(quick, {"n": 2})  # the worker is idle again by now
        await recorder.wait("succeeded", second.id)
        worker.stop()
    assert (await jobs.get(second.id)).output == 2


async def test_drain_called_before_run_starts_returns(jobs: Jobs) -> None:
    worker = Worker(jobs)
    async with anyio.create_task_group() as tg:
        tg.start_soon(worker.drain)
        tg.start_soon(worker.run)
    assert worker.in_flight == 0
