"""Caps decide in the claim, not after it: a claim walks past the jobs whose cap its worker found
full (`ClaimExclusion`), and a job shed at a cap goes back in its place in line.

Claimed and then shed, a capped tenant's backlog stood before every other tenant's jobs (the
worker claimed it again and again), and each shed sent the job to the back of the line, so
neither a tenant cap's fairness nor priority held among a capped name's starts."""

from __future__ import annotations

from collections.abc import Callable

import anyio
import anyio.lowlevel
from pydantic import BaseModel

from engine import JobContext, JobRegistry, Jobs, Limits, ManualClock, Worker, job
from engine.testing.observe import Recorder
from schemas.jobs import ClaimExclusion, NackOptions


class Item(BaseModel):
    n: int


async def until(done: Callable[[], bool]) -> None:
    """Let the worker run (its claims may be on a socket) until `done()`, for at most 10 s."""
    with anyio.fail_after(10):
        while not done():
            await anyio.lowlevel.checkpoint()


async def test_a_claim_walks_past_the_queues_names_and_tenants_it_excludes(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    @job(idempotency_key=lambda i: f"a:{i.n}", queue="alpha", registry=registry)
    async def in_alpha(input: Item, ctx: JobContext) -> None:
        return None

    @job(idempotency_key=lambda i: f"b:{i.n}", queue="beta", registry=registry)
    async def in_beta(input: Item, ctx: JobContext) -> None:
        return None

    big = [await jobs.enqueue(in_alpha, {"n": n}, tenant_id="big") for n in range(4)]
    clock.advance(1)
    small = await jobs.enqueue(in_alpha, {"n": 10}, tenant_id="small")
    untenanted = await jobs.enqueue(in_alpha, {"n": 11})
    beta = await jobs.enqueue(in_beta, {"n": 12}, tenant_id="big")
    driver = jobs.driver

    claimed = await driver.claim(
        "w", 10, 60_000, excluding=ClaimExclusion(tenants=frozenset({"big"}))
    )
    # A job with no tenant is under no tenant's cap.
    assert {c.record.id for c in claimed} == {small.id, untenanted.id}
    for c in claimed:
        await driver.nack(c.record.id, c.token, NackOptions(counts_as_attempt=False))

    by_name = await driver.claim(
        "w", 10, 60_000, excluding=ClaimExclusion(names=frozenset({"in_alpha"}))
    )
    assert [c.record.id for c in by_name] == [beta.id]
    await driver.nack(by_name[0].record.id, by_name[0].token, NackOptions(counts_as_attempt=False))

    by_queue = await driver.claim(
        "w", 10, 60_000, excluding=ClaimExclusion(queues=frozenset({"alpha"}))
    )
    assert [c.record.id for c in by_queue] == [beta.id]
    await driver.nack(
        by_queue[0].record.id, by_queue[0].token, NackOptions(counts_as_attempt=False)
    )

    # Restricted to the worker's queues too, and nothing left out when nothing is excluded.
    mine = await driver.claim(
        "w", 10, 60_000, ["alpha"], ClaimExclusion(tenants=frozenset({"big"}))
    )
    assert {c.record.id for c in mine} == {small.id, untenanted.id}
    everything = await driver.claim("w", 10, 60_000, excluding=ClaimExclusion())
    assert {c.record.id for c in everything} == {r.id for r in big} | {beta.id}


async def test_an_expired_lease_of_an_excluded_tenant_is_left_alone(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    # Taking over a lease that ran out would start the job again: a full cap holds it back too.
    @job(idempotency_key=lambda i: f"e:{i.n}", registry=registry)
    async def work(input: Item, ctx: JobContext) -> None:
        return None

    r = await jobs.enqueue(work, {"n": 1}, tenant_id="big")
    (held,) = await jobs.driver.claim("gone", 1, 1_000)
    clock.advance(60_000)
    excluded = ClaimExclusion(tenants=frozenset({"big"}))
    assert await jobs.driver.claim("w", 5, 60_000, excluding=excluded) == []
    (again,) = await jobs.driver.claim("w", 5, 60_000)
    assert (again.record.id, held.record.id) == (r.id, r.id)


async def test_a_job_handed_back_unstarted_keeps_its_place_in_line(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    @job(idempotency_key=lambda i: f"p:{i.n}", registry=registry)
    async def work(input: Item, ctx: JobContext) -> None:
        return None

    first = await jobs.enqueue(work, {"n": 1})
    clock.advance(10)
    later = [await jobs.enqueue(work, {"n": n}) for n in range(2, 5)]
    stored = await jobs.get(first.id)
    (held,) = await jobs.driver.claim("w", 1, 60_000)
    assert held.record.id == first.id
    clock.advance(1_000)
    back = await jobs.driver.nack(first.id, held.token, NackOptions(counts_as_attempt=False))
    assert (back.state, back.attempt, back.run_at, back.queued_at) == (
        "ready",
        0,
        stored.run_at,
        stored.queued_at,
    )
    (next_one,) = await jobs.driver.claim("w", 1, 60_000)
    assert next_one.record.id == first.id  # not behind the jobs enqueued after it
    # A hand-back with a delay still waits it out.
    clock.advance(1)
    delayed = await jobs.driver.nack(
        first.id, next_one.token, NackOptions(delay_ms=5_000, counts_as_attempt=False)
    )
    assert delayed.run_at == clock.now_ms() + 5_000
    assert [c.record.id for c in await jobs.driver.claim("w", 5, 60_000)] == [r.id for r in later]


async def test_a_tenant_at_its_cap_does_not_hold_back_the_tenants_behind_it(
    jobs: Jobs, registry: JobRegistry
) -> None:
    gate = anyio.Event()
    started: list[str] = []

    @job(idempotency_key=lambda i: f"t:{i.n}", registry=registry)
    async def work(input: Item, ctx: JobContext) -> None:
        started.append(ctx.tenant_id or "")
        await gate.wait()

    for n in range(30):
        await jobs.enqueue(work, {"n": n}, tenant_id="big")
    small = [await jobs.enqueue(work, {"n": 100 + n}, tenant_id="small") for n in range(3)]
    recorder = Recorder()
    worker = Worker(
        jobs, concurrency=4, limits=Limits(per_tenant=1), listeners=[recorder], lease_ms=600_000
    )
    async with anyio.create_task_group() as tg:
        tg.start_soon(worker.run)
        # big's first job and small's first run together, while big's backlog still waits.
        await until(lambda: sorted(started) == ["big", "small"])
        # The other two of small's wait ready, once the claims on their way have landed.
        with anyio.fail_after(10):
            while sorted([(await jobs.get(r.id)).state for r in small]) != [
                "ready",
                "ready",
                "running",
            ]:
                await anyio.lowlevel.checkpoint()
        # A claim or two of each tenant's backlog (the second on its way before the first's
        # refusals land): the worker then leaves both alone. It shed big's whole backlog before.
        sheds = [e for e in recorder.events if e.kind == "shed"]
        assert len(sheds) < 15
        worker.stop()
        gate.set()


async def test_a_capped_name_starts_its_jobs_in_priority_order(
    jobs: Jobs, registry: JobRegistry
) -> None:
    gate = anyio.Event()
    started: list[int] = []

    @job(idempotency_key=lambda i: f"o:{i.n}", concurrency=1, registry=registry)
    async def one_at_a_time(input: Item, ctx: JobContext) -> None:
        started.append(input.n)
        if input.n == -1:
            await gate.wait()

    await jobs.enqueue(one_at_a_time, {"n": -1})
    worker = Worker(jobs, concurrency=5, scheduler=False, outbox_relay=False, prune=False)
    async with anyio.create_task_group() as tg:
        tg.start_soon(worker.run)
        await until(lambda: started == [-1])
        # Enqueued while the one slot is taken: each starts as the slot frees, highest first.
        for n in (3, 1, 4, 0, 2):
            await jobs.enqueue(one_at_a_time, {"n": n}, priority=n)
        gate.set()
        try:
            await until(lambda: len(started) == 6)
        except TimeoutError:
            raise AssertionError(started) from None
        worker.stop()
    assert started == [-1, 4, 3, 2, 1, 0]
