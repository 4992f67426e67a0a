"""Staging in the application's transaction: the job exists if and only if it commits."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from engine import Enqueue, JobContext, JobDefinition, JobRegistry, Jobs, ManualClock, job
from engine.errors import JobsError
from engine.outbox import OutboxRelay
from tests.outbox.apptx import AppDatabase


class Order(BaseModel):
    order_id: str


def declare_confirm(registry: JobRegistry) -> JobDefinition[Order]:
    @job(idempotency_key=lambda i: f"order:{i.order_id}", registry=registry)
    async def confirm_order(input: Order, ctx: JobContext) -> None:
        return None

    return confirm_order


async def published(jobs: Jobs) -> int:
    return await OutboxRelay(jobs, relay_id="test").run_until_empty()


async def test_a_committed_transaction_leaves_exactly_one_job(
    jobs: Jobs, registry: JobRegistry, app: AppDatabase
) -> None:
    confirm = declare_confirm(registry)
    tx = await app.begin()
    await tx.insert_order("o-1")
    staged = await jobs.stage(tx.handle, confirm, {"order_id": "o-1"}, tenant_id="acme")
    assert (await jobs.list()).jobs == []  # staged, not yet a job
    await tx.commit()
    assert await published(jobs) == 1
    record = await jobs.get(staged.job_id)
    assert (record.name, record.tenant_id, record.input) == (
        "confirm_order",
        "acme",
        {"order_id": "o-1"},
    )
    assert record.idempotency_key == "order:o-1"  # built exactly as enqueue builds it
    assert len((await jobs.list()).jobs) == 1
    assert await app.orders() == ["o-1"]
    assert await published(jobs) == 0  # published once, never again


async def test_a_rolled_back_transaction_leaves_no_job(
    jobs: Jobs, registry: JobRegistry, app: AppDatabase
) -> None:
    confirm = declare_confirm(registry)
    tx = await app.begin()
    await tx.insert_order("o-2")
    await jobs.stage(tx.handle, confirm, {"order_id": "o-2"})
    await tx.rollback()
    assert await published(jobs) == 0
    assert (await jobs.list()).jobs == []
    assert await app.orders() == []


async def test_staging_outside_a_transaction_is_refused(
    jobs: Jobs, registry: JobRegistry, app: AppDatabase
) -> None:
    confirm = declare_confirm(registry)
    outside = await app.no_transaction()
    with pytest.raises(JobsError) as caught:
        await jobs.stage(outside, confirm, {"order_id": "o-3"})
    assert caught.value.code == "OUTBOX_NO_TX"
    with pytest.raises(JobsError) as caught:
        await jobs.stage(object(), confirm, {"order_id": "o-3"})
    assert caught.value.code == "INVALID_ARGUMENT"  # not a transaction at all (its own test)
    assert await published(jobs) == 0


async def test_stage_many_is_one_write_and_validates_every_item_first(
    jobs: Jobs, registry: JobRegistry, app: AppDatabase, clock: ManualClock
) -> None:
    confirm = declare_confirm(registry)
    tx = await app.begin()
    with pytest.raises(JobsError) as caught:
        await jobs.stage_many(
            tx.handle,
            [Enqueue(confirm, {"order_id": "a"}), Enqueue(confirm, {"order": "missing"})],
        )
    assert caught.value.code == "JOB_INPUT_INVALID"
    with pytest.raises(JobsError) as caught:
        await jobs.stage_many(tx.handle, [Enqueue("no_such_job", {})])
    assert caught.value.code == "JOB_UNKNOWN"
    with pytest.raises(JobsError) as caught:
        # A duplicate is only found after the commit, by the relay: nobody to raise it to.
        await jobs.stage_many(tx.handle, [Enqueue(confirm, {"order_id": "a"}, on_conflict="error")])
    assert caught.value.code == "INVALID_ARGUMENT"
    staged = await jobs.stage_many(
        tx.handle,
        [Enqueue(confirm, {"order_id": "b"}), Enqueue(confirm, {"order_id": "c"}, delay=60)],
    )
    await tx.commit()
    assert await published(jobs) == 2
    later = await jobs.get(staged[1].job_id)
    assert later.state == "delayed" and later.run_at == clock.now_ms() + 60_000
    assert sorted(j.input["order_id"] for j in (await jobs.list()).jobs) == ["b", "c"]


async def test_a_staged_job_dedupes_into_a_live_job_with_its_key(
    jobs: Jobs, registry: JobRegistry, app: AppDatabase
) -> None:
    confirm = declare_confirm(registry)
    live = await jobs.enqueue(confirm, {"order_id": "o-4"})
    tx = await app.begin()
    await jobs.stage(tx.handle, confirm, {"order_id": "o-4"})
    await tx.commit()
    relay = OutboxRelay(jobs, relay_id="test")
    batch = await relay.pass_once()
    assert batch is not None
    assert [(r.id, r.deduped) for r in batch.results] == [(live.id, True)]
    assert len((await jobs.list()).jobs) == 1
