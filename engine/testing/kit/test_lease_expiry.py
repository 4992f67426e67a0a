"""An attempt lost to an expired lease leaves one `lease_expired` event (engine.lease_expiry).

The holder here is a claim whose worker vanished: it never heartbeats nor settles, as when the
worker was killed or the claim's reply never reached it. The clock is moved past its lease, and
the claim that takes the job over writes the event in the same write as the takeover."""

from __future__ import annotations

from pydantic import BaseModel

from engine import JobContext, JobRegistry, Jobs, ManualClock, Retry, Worker, job
from engine.lease_expiry import LEASE_EXPIRED, lease_expired_data
from schemas.events import EventRecord

LEASE_MS = 30_000


class Item(BaseModel):
    n: int


def _lost(trace_events: list[EventRecord]) -> list[EventRecord]:
    return [e for e in trace_events if e.kind == LEASE_EXPIRED]


async def test_a_takeover_records_the_lost_attempt_once_and_the_next_attempt_runs(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    ran: list[int] = []

    @job(idempotency_key=lambda i: f"i:{i.n}", registry=registry)
    async def work(input: Item, ctx: JobContext) -> None:
        ran.append(ctx.attempt)

    r = await jobs.enqueue(work, {"n": 1}, tenant_id="acme")
    (vanished,) = await jobs.driver.claim("vanished", 1, lease_ms=LEASE_MS)
    assert vanished.record.attempt == 1
    rescuer = Worker(jobs, worker_id="rescuer")
    clock.advance(LEASE_MS - 1)
    assert await rescuer.run_until_idle() == 0  # the lease still holds: nothing is lost yet
    assert (await jobs.trace(r.id)).events == []
    clock.advance(1)
    taken_at = clock.now_ms()
    assert await rescuer.run_until_idle() == 1

    record = await jobs.get(r.id)
    assert (record.state, record.attempt) == ("done", 2)
    assert ran == [2]
    trace = await jobs.trace(r.id)
    assert trace.events == [
        EventRecord(
            job_id=r.id,
            at=taken_at,
            kind=LEASE_EXPIRED,
            actor="rescuer",
            tenant_id="acme",
            data=lease_expired_data(1, "vanished", vanished.lease_expires_at),
        )
    ]


async def test_each_lost_attempt_has_its_own_event_and_a_fresh_claim_writes_none(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    @job(idempotency_key=lambda i: f"i:{i.n}", registry=registry)
    async def work(input: Item, ctx: JobContext) -> None:
        return None

    abandoned = await jobs.enqueue(work, {"n": 1})
    (first,) = await jobs.driver.claim("a", 1, lease_ms=LEASE_MS)
    waiting = await jobs.enqueue(work, {"n": 2})
    clock.advance(LEASE_MS)
    # One claim takes both: the one it took over gets the event, the waiting one none.
    second = await jobs.driver.claim("b", 10, lease_ms=LEASE_MS)
    assert {c.record.id: c.record.attempt for c in second} == {abandoned.id: 2, waiting.id: 1}
    assert (await jobs.trace(waiting.id)).events == []
    clock.advance(LEASE_MS)
    third = await jobs.driver.claim("c", 10, lease_ms=LEASE_MS)
    assert {c.record.id: c.record.attempt for c in third} == {abandoned.id: 3, waiting.id: 2}

    lost = _lost((await jobs.trace(abandoned.id)).events)
    held_until = {c.record.id: c.lease_expires_at for c in second}
    assert [(e.actor, e.data) for e in lost] == [
        ("b", lease_expired_data(1, "a", first.lease_expires_at)),
        ("c", lease_expired_data(2, "b", held_until[abandoned.id])),
    ]
    (waited,) = _lost((await jobs.trace(waiting.id)).events)
    assert (waited.actor, waited.data) == (
        "c",
        lease_expired_data(1, "b", held_until[waiting.id]),
    )


async def test_a_job_whose_every_lease_expired_dies_with_each_loss_in_its_history(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    @job(idempotency_key=lambda i: f"i:{i.n}", retry=Retry(attempts=2), registry=registry)
    async def work(input: Item, ctx: JobContext) -> None:
        raise AssertionError("a claim past max_attempts never runs the body")

    r = await jobs.enqueue(work, {"n": 1})
    for holder in ("a", "b"):
        assert len(await jobs.driver.claim(holder, 1, lease_ms=LEASE_MS)) == 1
        clock.advance(LEASE_MS)
    assert await Worker(jobs, worker_id="c").run_until_idle() == 1

    record = await jobs.get(r.id)
    # The claim that found both attempts spent ran no body: it gives its count back, so the
    # row shows the attempts the job had, 2 of 2, never 3 of 2.
    assert (record.state, record.attempt, record.max_attempts) == ("dead", 2, 2)
    assert record.last_error is not None and record.last_error.code == "JOB_SLOT_LOST"
    events = (await jobs.trace(r.id)).events
    assert [e.kind for e in events] == [LEASE_EXPIRED, LEASE_EXPIRED, "dead"]
    assert [(e.data or {}).get("attempt") for e in events[:2]] == [1, 2]
    assert [(e.data or {}).get("worker_id") for e in events[:2]] == ["a", "b"]
