"""The relay: batches in `(staged_at, id)` order, each claim fenced by its own token, published
exactly once even with two relays, and a dead relay's rows taken over after its lease."""

from __future__ import annotations

import anyio
from pydantic import BaseModel

from engine import Enqueue, JobContext, JobDefinition, JobRegistry, Jobs, ManualClock, Worker, job
from engine.ids import new_token
from engine.outbox import OutboxRelay, PublishedBatch
from schemas.outbox import StagedJob
from tests.outbox.apptx import AppDatabase
from tests.tasks.waiting import until_set


class Item(BaseModel):
    n: int


def declare_item(registry: JobRegistry, ran: anyio.Event | None = None) -> JobDefinition[Item]:
    @job(idempotency_key=lambda i: f"item:{i.n}", registry=registry)
    async def handle_item(input: Item, ctx: JobContext) -> None:
        if ran is not None:
            ran.set()

    return handle_item


async def stage_rows(
    jobs: Jobs,
    app: AppDatabase,
    clock: ManualClock,
    definition: JobDefinition[Item],
    *,
    transactions: int,
    per_transaction: int,
) -> list[tuple[int, StagedJob]]:
    """Stage in several transactions, a millisecond apart: rows of one transaction share a
    `staged_at`, so only the id orders them — the tie `(staged_at, id)` exists to break."""
    staged: list[tuple[int, StagedJob]] = []
    n = 0
    for _ in range(transactions):
        tx = await app.begin()
        items = [Enqueue(definition, {"n": n + k}) for k in range(per_transaction)]
        n += per_transaction
        at = clock.now_ms()
        staged.extend((at, s) for s in await jobs.stage_many(tx.handle, items))
        await tx.commit()
        clock.advance(1)
    return staged


async def test_two_relays_over_1000_rows_publish_each_exactly_once_in_order(
    jobs: Jobs, registry: JobRegistry, app: AppDatabase, clock: ManualClock
) -> None:
    item = declare_item(registry)
    staged = await stage_rows(jobs, app, clock, item, transactions=10, per_transaction=100)
    order = [s.outbox_id for _, s in sorted(staged, key=lambda p: (p[0], p[1].outbox_id))]
    job_of = {s.outbox_id: s.job_id for _, s in staged}
    batches: list[PublishedBatch] = []

    async def relay(relay_id: str) -> None:
        worker = OutboxRelay(jobs, relay_id=relay_id, batch_size=64)
        while (batch := await worker.pass_once()) is not None:
            batches.append(batch)
            await anyio.lowlevel.checkpoint()  # let the other relay claim in between

    with anyio.fail_after(50):
        async with anyio.create_task_group() as tg:
            tg.start_soon(relay, "relay-a")
            tg.start_soon(relay, "relay-b")

    assert {b.relay_id for b in batches} == {"relay-a", "relay-b"}
    claimed = [row.id for b in batches for row in b.rows]
    assert sorted(claimed) == sorted(order)  # every row claimed by exactly one batch
    position = {outbox_id: k for k, outbox_id in enumerate(order)}
    for batch in batches:
        ids = [row.id for row in batch.rows]
        # Each batch is claimed and published in the total order. (Not necessarily a contiguous
        # run of it: two claims racing on Postgres skip each other's locked rows.)
        assert [position[i] for i in ids] == sorted(position[i] for i in ids)
        assert [r.id for r in batch.results] == [job_of[i] for i in ids]
        assert not any(r.deduped for r in batch.results)
    page = await jobs.list(limit=1000)
    assert sorted(j.id for j in page.jobs) == sorted(job_of.values())
    assert sorted(j.input["n"] for j in page.jobs) == list(range(1000))


async def test_a_killed_relays_rows_are_published_after_its_lease_expires(
    jobs: Jobs, registry: JobRegistry, app: AppDatabase, clock: ManualClock
) -> None:
    item = declare_item(registry)
    staged = await stage_rows(jobs, app, clock, item, transactions=2, per_transaction=5)
    # A relay claims a batch and dies before publishing: nothing is released.
    dead_token = new_token()
    held = await jobs.driver.outbox_claim("dead", dead_token, 100, 30_000)
    assert len(held) == 10
    survivor = OutboxRelay(jobs, relay_id="survivor", lease_ms=30_000)
    assert await survivor.pass_once() is None  # still leased to the dead relay
    clock.advance(30_000)
    batch = await survivor.pass_once()
    assert batch is not None
    assert [r.id for r in batch.results] == [s.job_id for _, s in staged]
    # The dead relay wakes up: its token owns nothing any more.
    assert await jobs.driver.outbox_publish(dead_token, held) == []
    await jobs.driver.outbox_release(dead_token, [r.id for r in held])
    assert await survivor.pass_once() is None
    assert len((await jobs.list(limit=100)).jobs) == 10


async def test_a_stale_token_neither_releases_nor_publishes_rows_another_claim_holds(
    jobs: Jobs, registry: JobRegistry, app: AppDatabase, clock: ManualClock
) -> None:
    item = declare_item(registry)
    await stage_rows(jobs, app, clock, item, transactions=1, per_transaction=3)
    stale, fresh = new_token(), new_token()
    first = await jobs.driver.outbox_claim("slow", stale, 10, 1_000)
    clock.advance(1_000)
    second = await jobs.driver.outbox_claim("fast", fresh, 10, 30_000)
    assert [r.id for r in second] == [r.id for r in first]
    await jobs.driver.outbox_release(stale, [r.id for r in first])  # not its rows: no effect
    assert await jobs.driver.outbox_claim("third", new_token(), 10, 30_000) == []
    assert await jobs.driver.outbox_publish(stale, first) == []
    assert len(await jobs.driver.outbox_publish(fresh, second)) == 3
    assert await jobs.driver.outbox_publish(fresh, second) == []  # first writer wins
    assert len((await jobs.list()).jobs) == 3


async def test_one_row_that_cannot_publish_does_not_hold_back_the_rest(
    jobs: Jobs, registry: JobRegistry, app: AppDatabase, clock: ManualClock
) -> None:
    item = declare_item(registry)
    live = await jobs.enqueue(item, {"n": 1})
    tx = await app.begin()
    good = await jobs.stage_many(tx.handle, [Enqueue(item, {"n": 0}), Enqueue(item, {"n": 2})])
    # A row staged before `stage()` refused on_conflict='error' (by an older build, say): its
    # publish raises JOB_DUPLICATE against the live job and would fail the whole batch.
    (poison,) = jobs.items.build(
        [Enqueue(item, {"n": 1}, on_conflict="error")], None, clock.now_ms(), None
    )
    (poison_id,) = await jobs.driver.outbox_stage(tx.handle, [poison])
    await tx.commit()
    relay = OutboxRelay(jobs, relay_id="relay")
    batch = await relay.pass_once()
    assert batch is not None
    assert batch.released == [poison_id]
    assert sorted(r.id for r in batch.results) == sorted(s.job_id for s in good)
    assert sorted(j.id for j in (await jobs.list()).jobs) == sorted(
        [live.id, *(s.job_id for s in good)]
    )


async def test_the_worker_runs_the_relay_in_process_and_stops_it_on_drain(
    jobs: Jobs, registry: JobRegistry, app: AppDatabase, clock: ManualClock
) -> None:
    ran = anyio.Event()
    item = declare_item(registry, ran)
    tx = await app.begin()
    staged = await jobs.stage(tx.handle, item, {"n": 7})
    await tx.commit()
    worker = Worker(jobs, concurrency=1, scheduler=False)
    assert worker.outbox_relay is not None
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(worker.run)
            await until_set(ran, clock, worker.poll_ms)
            await worker.drain()
    record = await jobs.get(staged.job_id)
    assert record.state == "done"
