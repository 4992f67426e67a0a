"""engine.worker_rates: what a worker holds between rate-limit takes stays bounded."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from engine import JobContext, JobRegistry, Jobs, ManualClock, RateLimit, job
from engine.drivers.base import RATES, require
from engine.limits import Limits
from engine.rate_limits import RateVerdict
from engine.worker_events import WorkerEvents
from engine.worker_rates import SPARE_TTL_MS, RateGate
from schemas.jobs import NackOptions


class Order(BaseModel):
    customer: str


async def test_spares_of_keys_never_seen_again_are_forgotten(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    """A keyed rate takes starts ahead per customer; a customer seen once never uses them, and
    a worker that ran for a year held one entry per customer it ever served."""

    @job(
        idempotency_key=lambda i: i.customer,
        rate_limit=RateLimit(100, per=1, burst=40, key=lambda i: i.customer),
        registry=registry,
    )
    async def ship(input: Order, ctx: JobContext) -> None:
        pass

    gate = RateGate(jobs.driver, clock, Limits(), poke=lambda: None, idle=lambda: True)
    definition = registry.get("ship")
    for n in range(1_000):
        made = await jobs.enqueue(ship, {"customer": f"c{n}"})
        record = await jobs.driver.get(made.id)
        assert await gate.take(record, definition) is None
        clock.advance(1)
    # Only the spares still fresh are held: those taken within the last SPARE_TTL_MS.
    assert len(gate._spares) <= SPARE_TTL_MS + 1


async def test_a_shed_job_comes_back_at_its_slot_however_long_the_take_took(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    """The nack adds its delay to its own now: a delay counted from before a take that took
    30 ms put the job back 30 ms after its reserved slot, where the wake-up at the slot found
    nothing and the next came an interval later, past the reservation (5 a second ran at 0.7
    to 2.6 a second)."""

    @job(
        idempotency_key=lambda i: i.customer,
        rate_limit=RateLimit(5, per=1),
        registry=registry,
    )
    async def ship(input: Order, ctx: JobContext) -> None:
        pass

    gate = RateGate(jobs.driver, clock, Limits(), poke=lambda: None, idle=lambda: True)
    store = require(jobs.driver, RATES)

    class SlowTake:
        async def take_rates(self, *args: Any) -> RateVerdict:
            verdict = await store.take_rates(*args)
            clock.advance(30)  # the take's round trip on a busy server
            return verdict

    gate._store = SlowTake()  # type: ignore[assignment]
    definition = registry.get("ship")
    assert definition is not None
    for customer in ("a", "b"):
        await jobs.enqueue(ship, {"customer": customer})
    first, second = await jobs.driver.claim("w", 2, 60_000, None)
    events = WorkerEvents(clock, "w", [])
    assert not await gate.shed_over(first, definition, events)  # starts now
    slot = clock.now_ms() + 200 - 30  # the first take moved the key's TAT one interval on
    assert await gate.shed_over(second, definition, events)
    assert (await jobs.driver.get(second.record.id)).run_at == slot


async def test_a_job_that_waited_for_its_turn_wakes_the_worker_at_the_next_one(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    """A worker started as the one that shed a backlog stopped knew none of its reserved turns
    and claimed them at its polls: 5 a second ran at 2 until the turns ran out. A job that
    waited for its turn (run_at past queued_at) now wakes it one interval on."""

    @job(idempotency_key=lambda i: i.customer, rate_limit=RateLimit(5, per=1), registry=registry)
    async def ship(input: Order, ctx: JobContext) -> None:
        pass

    gate = RateGate(jobs.driver, clock, Limits(), poke=lambda: None, idle=lambda: True)
    definition = registry.get("ship")
    assert definition is not None
    fresh = await jobs.driver.get((await jobs.enqueue(ship, {"customer": "a"})).id)
    assert await gate.take(fresh, definition) is None
    assert gate._wakes == []  # no turn waited for: nothing to wake for
    waited = await jobs.enqueue(ship, {"customer": "b"})
    [claimed] = [
        c for c in await jobs.driver.claim("w", 2, 60_000, None) if c.record.id == waited.id
    ]
    # Shed to its turn 1 s on: run_at moves, queued_at stays.
    shed = NackOptions(delay_ms=1_000, counts_as_attempt=False)
    await jobs.driver.nack(waited.id, claimed.token, shed)
    record = await jobs.driver.get(waited.id)
    clock.set(record.run_at + 50)  # claimed 50 ms into its turn
    assert await gate.take(record, definition) is None
    assert gate._wakes == [record.run_at + 200]
