"""engine.worker_rates: what a worker holds between rate-limit takes stays bounded."""

from __future__ import annotations

from pydantic import BaseModel

from engine import JobContext, JobRegistry, Jobs, ManualClock, RateLimit, job
from engine.limits import Limits
from engine.worker_rates import SPARE_TTL_MS, RateGate


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
        assert await gate.take(record, definition, clock.now_ms()) is None
        clock.advance(1)
    # Only the spares still fresh are held: those taken within the last SPARE_TTL_MS.
    assert len(gate._spares) <= SPARE_TTL_MS + 1
