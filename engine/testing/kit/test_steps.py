"""Durable steps: persisted before return, replayed without re-running (rules 6, 7, 13)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from engine import JobContext, JobRegistry, Jobs, ManualClock, Retry, Worker, job, retry_schedule
from engine.drivers.base import AckWrite, StepWrite
from engine.ids import new_id
from engine.testing.observe import Recorder
from schemas.jobs import EnqueueRequest, NackOptions
from schemas.steps import StepRecord


class Order(BaseModel):
    order_id: int


async def test_a_completed_step_is_not_run_again_on_retry(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    calls: list[str] = []
    failures = {"left": 1}

    def charge(order_id: int) -> dict[str, Any]:
        calls.append("charge")
        return {"charge_id": f"ch_{order_id}"}

    @job(
        idempotency_key=lambda i: f"order:{i.order_id}", retry=Retry(attempts=3), registry=registry
    )
    async def fulfil(input: Order, ctx: JobContext) -> str:
        charge_out = await ctx.step.run("charge", charge, input.order_id)
        if failures["left"]:
            failures["left"] -= 1
            raise RuntimeError("carrier API down")
        calls.append("ship")
        return str(charge_out["charge_id"])

    r = await jobs.enqueue(fulfil, {"order_id": 7})
    worker = Worker(jobs)
    await worker.run_until_idle()
    record = await jobs.get(r.id)
    assert record.state == "delayed" and record.attempt == 1
    assert record.last_error is not None
    assert (record.last_error.code, record.last_error.cause) == (
        "JOB_FAILED",
        "RuntimeError: carrier API down",
    )
    clock.advance(retry_schedule(Retry(attempts=3))[0])
    await worker.run_until_idle()
    record = await jobs.get(r.id)
    assert record.state == "done" and record.output == "ch_7"
    assert calls == ["charge", "ship"]
    trace = await jobs.trace(r.id)
    assert [(s.name, s.status, s.output) for s in trace.steps] == [
        ("charge", "completed", {"charge_id": "ch_7"})
    ]


async def test_two_steps_with_one_name_fail_the_run(jobs: Jobs, registry: JobRegistry) -> None:
    @job(idempotency_key=lambda i: f"o:{i.order_id}", registry=registry)
    async def twice(input: Order, ctx: JobContext) -> None:
        await ctx.step.run("a", lambda: 1)
        await ctx.step.run("a", lambda: 2)

    r = await jobs.enqueue(twice, {"order_id": 1})
    await Worker(jobs).run_until_idle()
    record = await jobs.get(r.id)
    # Deterministic programming error: failed now, not retried into a dead letter.
    assert record.state == "failed"
    assert record.last_error is not None and record.last_error.code == "STEP_DUPLICATE"


async def test_an_unserializable_step_result_is_refused(jobs: Jobs, registry: JobRegistry) -> None:
    @job(idempotency_key=lambda i: f"o:{i.order_id}", registry=registry)
    async def leaky(input: Order, ctx: JobContext) -> None:
        await ctx.step.run("conn", lambda: object())

    r = await jobs.enqueue(leaky, {"order_id": 1})
    await Worker(jobs).run_until_idle()
    record = await jobs.get(r.id)
    assert record.state == "failed"
    assert record.last_error is not None
    # One rule for every stored value (engine.storable): not JSON at all is outside it too.
    assert record.last_error.code == "JOB_OUTPUT_INVALID"


async def test_sleep_parks_without_an_attempt_and_resumes_after_it(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    ran: list[str] = []

    @job(idempotency_key=lambda i: f"o:{i.order_id}", retry=Retry(attempts=1), registry=registry)
    async def drip(input: Order, ctx: JobContext) -> None:
        await ctx.step.run("first", lambda: ran.append("first"))
        await ctx.step.sleep("cool-off", 3600)
        await ctx.step.run("second", lambda: ran.append("second"))

    r = await jobs.enqueue(drip, {"order_id": 1})
    worker = Worker(jobs)
    await worker.run_until_idle()
    record = await jobs.get(r.id)
    # Rule 7: a suspension leaves the ready bucket and burns no attempt, so a 1-attempt job
    # with a long sleep does not dead-letter.
    assert record.state == "suspended" and record.attempt == 0
    assert record.last_error is None
    (stats,) = await jobs.stats()
    assert (stats.suspended, stats.ready, stats.oldest_ready_ms) == (1, 0, 0)
    clock.advance(3_599_000)
    assert await worker.run_until_idle() == 0
    clock.advance(1_000)
    assert await worker.run_until_idle() == 1
    assert (await jobs.get(r.id)).state == "done"
    assert ran == ["first", "second"]


async def test_a_job_killed_after_step_two_resumes_at_step_three(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    """Rule 13: a lease that expires (worker killed) makes the job claimable again, and its
    completed steps are not re-run."""
    ran: list[str] = []

    @job(idempotency_key=lambda i: f"o:{i.order_id}", registry=registry)
    async def three_steps(input: Order, ctx: JobContext) -> None:
        for name in ("one", "two", "three"):
            await ctx.step.run(name, ran.append, name)

    r = await jobs.enqueue(three_steps, {"order_id": 1})
    # The doomed worker: claims, completes steps one and two through the real step store,
    # then dies without settling (no ack, no nack, no more heartbeats).
    (claimed,) = await jobs.driver.claim("doomed", 1, lease_ms=30_000)
    from engine.steps import StepApi

    steps = StepApi(
        settler=jobs.settler,
        clock=clock,
        job_name="three_steps",
        job_id=r.id,
        run_id=r.run_id,
        token=claimed.token,
        completed={},
    )
    await steps.run("one", ran.append, "one")
    await steps.run("two", ran.append, "two")
    assert ran == ["one", "two"]

    rescuer = Worker(jobs, worker_id="rescuer")
    assert await rescuer.run_until_idle() == 0  # the lease still holds
    clock.advance(30_000)
    (stats,) = await jobs.stats()
    assert stats.expired_leases == 1
    assert await rescuer.run_until_idle() == 1
    record = await jobs.get(r.id)
    assert record.state == "done" and record.attempt == 2
    assert ran == ["one", "two", "three"]

    # The dead worker's late writes are refused: it no longer holds the job.
    from engine.errors import JobsError

    with pytest.raises(JobsError) as raised:
        await jobs.settler.ack(r.id, claimed.token, None)
    assert raised.value.code == "JOB_SLOT_LOST"


async def test_a_stale_holder_cannot_settle_or_write_steps(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    @job(idempotency_key=lambda i: f"o:{i.order_id}", registry=registry)
    async def noop(input: Order, ctx: JobContext) -> None:
        return None

    r = await jobs.enqueue(noop, {"order_id": 1})
    (stale,) = await jobs.driver.claim("a", 1, lease_ms=1_000)
    clock.advance(1_000)
    (fresh,) = await jobs.driver.claim("b", 1, lease_ms=30_000)
    assert fresh.token != stale.token
    from engine.errors import JobFailedError, JobsError
    from schemas.jobs import NackOptions
    from schemas.steps import StepRecord

    for attempt in (
        jobs.settler.ack(r.id, stale.token, None),
        jobs.driver.nack(
            r.id, stale.token, NackOptions(error=JobFailedError(r.id, "late").to_payload())
        ),
        jobs.driver.heartbeat(r.id, stale.token, 30_000),
        jobs.settler.save_step(
            r.id,
            stale.token,
            StepRecord(job_id=r.id, run_id=r.run_id, name="x", status="completed", started_at=0),
        ),
    ):
        with pytest.raises(JobsError) as raised:
            await attempt
        assert raised.value.code == "JOB_SLOT_LOST"
    await jobs.settler.ack(r.id, fresh.token, None)
    assert (await jobs.get(r.id)).state == "done"
    assert await jobs.driver.load_steps(r.run_id) == []


async def test_worker_events_report_each_state_change(jobs: Jobs, registry: JobRegistry) -> None:
    @job(idempotency_key=lambda i: f"o:{i.order_id}", registry=registry)
    async def ok(input: Order, ctx: JobContext) -> int:
        return input.order_id

    recorder = Recorder()
    r = await jobs.enqueue(ok, {"order_id": 3})
    await Worker(jobs, listeners=[recorder]).run_until_idle()
    assert recorder.kinds(r.id) == ["claimed", "succeeded"]
    assert (await jobs.get(r.id)).output == 3


def _request(now: int, key: str) -> EnqueueRequest:
    return EnqueueRequest(
        id=new_id(),
        run_id=new_id(),
        name="work",
        queue="default",
        idempotency_key=key,
        input={},
        run_at=now,
        max_attempts=3,
    )


async def test_the_claim_says_which_runs_may_have_steps_to_replay(
    jobs: Jobs, clock: ManualClock
) -> None:
    driver = jobs.driver
    now = clock.now_ms()
    fresh, parked, abandoned = await driver.enqueue(
        [_request(now, key) for key in ("fresh", "parked", "abandoned")]
    )
    first = {c.record.id: c for c in await driver.claim("w1", 3, 1_000)}
    # Never ran a step: the first step of each will read nothing, so it need not read at all.
    assert [first[r.id].has_steps for r in (fresh, parked, abandoned)] == [False, False, False]

    for r in (parked, abandoned):
        step = StepRecord(
            job_id=r.id,
            run_id=r.run_id,
            name="one",
            status="completed",
            started_at=now,
            finished_at=now,
            output=1,
        )
        assert await driver.save_steps_many([StepWrite(r.id, first[r.id].token, step)]) == [None]
    assert await driver.ack_many([AckWrite(fresh.id, first[fresh.id].token, None)]) == [None]
    # A sleep parks the row without burning the attempt: attempt alone cannot tell a resume.
    await driver.nack(
        parked.id,
        first[parked.id].token,
        NackOptions(delay_ms=0, park=True, counts_as_attempt=False),
    )
    clock.advance(1_000)  # the abandoned job's lease runs out; its holder may still be writing
    second = {c.record.id: c for c in await driver.claim("w2", 3, 1_000)}
    assert second[parked.id].has_steps and second[parked.id].record.attempt == 1
    assert second[abandoned.id].has_steps
    assert fresh.id not in second
