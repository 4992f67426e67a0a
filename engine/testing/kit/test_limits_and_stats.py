"""Limits shed without parking; stats keep seeing shed jobs (rule 7); tenant scoping (rule 4)."""

from __future__ import annotations

import anyio
import anyio.lowlevel
import pytest
from pydantic import BaseModel

from engine import JobContext, JobRegistry, Jobs, Limits, ManualClock, RateLimit, Retry, Worker, job
from engine.errors import JobsError
from engine.testing.observe import Recorder


class Item(BaseModel):
    n: int


async def test_a_saturated_queue_keeps_reporting_depth_and_a_growing_age(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    """20 jobs, concurrency 10, global cap 1: the sheds stay READY, so depth reads 19-20 and
    the oldest-ready age grows. Filed as suspended, both signals went quiet at saturation."""
    gate = anyio.Event()
    running = anyio.Event()

    @job(idempotency_key=lambda i: f"i:{i.n}", registry=registry)
    async def work(input: Item, ctx: JobContext) -> None:
        running.set()
        await gate.wait()

    for n in range(20):
        await jobs.enqueue(work, {"n": n})
    recorder = Recorder()
    worker = Worker(
        jobs, concurrency=10, limits=Limits(global_cap=1), listeners=[recorder], lease_ms=600_000
    )
    async with anyio.create_task_group() as tg:
        tg.start_soon(worker.run_until_idle)
        with anyio.fail_after(10):
            await running.wait()
        await recorder.wait("shed", count=9)
        (stats,) = await jobs.stats()
        assert stats.ready == 19 and stats.running == 1 and stats.suspended == 0
        clock.advance(60_000)
        (later,) = await jobs.stats()
        assert later.ready == 19
        assert later.oldest_ready_ms >= 60_000  # still growing: sheds did not reset it
        gate.set()
    shed = [e for e in recorder.events if e.kind == "shed"]
    assert shed and all(e.reason == "at cap global" for e in shed)
    # A shed is not a failure: no attempt burned and no last_error written.
    page = await jobs.list(state="ready", limit=100)
    assert all(j.last_error is None and j.attempt == 0 for j in page.jobs)


async def test_per_job_concurrency_sheds_the_excess(jobs: Jobs, registry: JobRegistry) -> None:
    gate = anyio.Event()
    started: list[int] = []

    @job(idempotency_key=lambda i: f"i:{i.n}", concurrency=2, registry=registry)
    async def capped(input: Item, ctx: JobContext) -> None:
        started.append(input.n)
        await gate.wait()

    for n in range(5):
        await jobs.enqueue(capped, {"n": n})
    recorder = Recorder()
    worker = Worker(jobs, concurrency=5, listeners=[recorder], lease_ms=600_000)
    async with anyio.create_task_group() as tg:
        tg.start_soon(worker.run_until_idle)
        await recorder.wait("shed", count=3)
        with anyio.fail_after(10):
            while len(started) < 2:  # the two under the cap may still be taking their slots
                await anyio.lowlevel.checkpoint()
        assert len(started) == 2
        (stats,) = await jobs.stats()
        assert (stats.running, stats.ready) == (2, 3)
        gate.set()
    assert {e.reason for e in recorder.events if e.kind == "shed"} == {"at cap job:capped"}


async def test_limits_are_per_tenant_and_per_queue(jobs: Jobs, registry: JobRegistry) -> None:
    gate = anyio.Event()

    @job(idempotency_key=lambda i: f"i:{i.n}", queue="emails", registry=registry)
    async def mail(input: Item, ctx: JobContext) -> None:
        await gate.wait()

    for n, tenant in enumerate(["acme", "acme", "acme", "globex"]):
        await jobs.enqueue(mail, {"n": n}, tenant_id=tenant)
    recorder = Recorder()
    worker = Worker(
        jobs,
        concurrency=4,
        limits=Limits(per_tenant=1, per_queue={"emails": 3}),
        listeners=[recorder],
        lease_ms=600_000,
    )
    async with anyio.create_task_group() as tg:
        tg.start_soon(worker.run_until_idle)
        await recorder.wait("shed", count=2)
        (stats,) = await jobs.stats()
        assert (stats.queue, stats.running, stats.ready) == ("emails", 2, 2)
        gate.set()
    reasons = {e.reason for e in recorder.events if e.kind == "shed"}
    assert reasons == {"at cap tenant:acme"}


async def test_limits_refuse_nonsense_caps() -> None:
    for bad in (0, -1, 1.5, True):
        with pytest.raises(JobsError) as raised:
            Limits(global_cap=bad)  # type: ignore[arg-type]
        assert raised.value.code == "INVALID_ARGUMENT"
    # A cap keyed by a name no queue or tenant can have held nothing back, without a word; a
    # cap that is no mapping was an AttributeError.
    for keyed in (
        {"per_queue": {"": 1}},
        {"per_queue": {"q\x00": 1}},
        {"tenant_overrides": {"": 2}},
        {"rate_per_queue": {"": RateLimit(1, per=1)}},
        {"per_queue": 5},
    ):
        with pytest.raises(JobsError) as raised:
            Limits(**keyed)
        assert raised.value.code == "INVALID_ARGUMENT", keyed


async def test_stats_buckets_per_queue(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    @job(idempotency_key=lambda i: f"i:{i.n}", queue="a", registry=registry)
    async def in_a(input: Item, ctx: JobContext) -> None:
        return None

    @job(idempotency_key=lambda i: f"i:{i.n}", queue="b", registry=registry)
    async def in_b(input: Item, ctx: JobContext) -> None:
        return None

    await jobs.enqueue(in_a, {"n": 1})
    clock.advance(5_000)
    await jobs.enqueue(in_a, {"n": 2})
    await jobs.enqueue(in_a, {"n": 3}, delay=100)
    await jobs.enqueue(in_b, {"n": 1})
    stats = {s.queue: s for s in await jobs.stats()}
    assert (stats["a"].ready, stats["a"].delayed, stats["a"].oldest_ready_ms) == (2, 1, 5_000)
    assert (stats["b"].ready, stats["b"].oldest_ready_ms) == (1, 0)
    assert [s.queue for s in await jobs.stats(["b"])] == ["b"]


async def test_stats_of_one_tenant_count_only_its_jobs(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    @job(idempotency_key=lambda i: f"i:{i.n}", queue="a", registry=registry)
    async def tenanted(input: Item, ctx: JobContext) -> None:
        return None

    await jobs.enqueue(tenanted, {"n": 1}, tenant_id="acme")
    clock.advance(1_000)
    for n in range(3):
        await jobs.enqueue(tenanted, {"n": n}, tenant_id="globex")
    await jobs.enqueue(tenanted, {"n": 9})
    (acme,) = await jobs.stats(tenant_id="acme")
    assert (acme.queue, acme.ready, acme.oldest_ready_ms) == ("a", 1, 1_000)
    (globex,) = await jobs.stats(["a"], tenant_id="globex")
    assert (globex.ready, globex.oldest_ready_ms) == (3, 0)
    assert await jobs.stats(tenant_id="nobody") == []
    (everyone,) = await jobs.stats()
    assert everyone.ready == 5


async def test_id_operations_with_a_tenant_scope_do_not_see_other_tenants(
    jobs: Jobs, registry: JobRegistry
) -> None:
    """Rule 4: another tenant's job is not found — no existence leak, nothing changes."""

    @job(idempotency_key=lambda i: f"i:{i.n}", retry=Retry(attempts=1), registry=registry)
    async def boom(input: Item, ctx: JobContext) -> None:
        raise RuntimeError("x")

    theirs = await jobs.enqueue(boom, {"n": 1}, tenant_id="acme")
    dead = await jobs.enqueue(boom, {"n": 2}, tenant_id="acme")
    await Worker(jobs).run_until_idle()
    assert (await jobs.get(dead.id)).state == "dead"
    await jobs.enqueue(boom, {"n": 1}, tenant_id="acme")  # a live one again for cancel
    live = (await jobs.list(state="ready", tenant_id="acme")).jobs[0]
    for operation in (
        jobs.get(live.id, tenant_id="globex"),
        jobs.trace(live.id, tenant_id="globex"),
        jobs.cancel(live.id, tenant_id="globex"),
        jobs.retry(dead.id, tenant_id="globex"),
    ):
        with pytest.raises(JobsError) as raised:
            await operation
        assert raised.value.code == "JOB_NOT_FOUND"
    assert (await jobs.get(live.id)).state == "ready"
    assert (await jobs.get(dead.id)).state == "dead"
    assert (await jobs.get(theirs.id, tenant_id="acme")).tenant_id == "acme"
    with pytest.raises(JobsError) as missing:
        await jobs.get("0" * 32)
    assert missing.value.code == "JOB_NOT_FOUND"


async def test_mutating_operations_are_recorded_as_events(
    jobs: Jobs, registry: JobRegistry
) -> None:
    @job(idempotency_key=lambda i: f"i:{i.n}", registry=registry)
    async def noop(input: Item, ctx: JobContext) -> None:
        return None

    r = await jobs.enqueue(noop, {"n": 1}, tenant_id="acme")
    await jobs.record_event(
        "mcp:enqueue_job",
        job_id=r.id,
        actor="mcp:enqueue_job",
        tenant_id="acme",
        data={"deduped": False},
    )
    await jobs.cancel(r.id, actor="mcp:cancel_job")
    events = (await jobs.trace(r.id)).events
    assert [(e.kind, e.actor, e.tenant_id) for e in events] == [
        ("mcp:enqueue_job", "mcp:enqueue_job", "acme"),
        ("cancelled", "mcp:cancel_job", "acme"),
    ]
