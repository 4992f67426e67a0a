"""`Worker.run_until_idle()` runs what is due, and a job staged in a transaction that committed is
due: it relays the outbox as a running worker's relay would, unless `outbox_relay=False`. It
returned having claimed nothing, the staged job never run, in the very test the README's
"Testing your jobs" shows how to write."""

from __future__ import annotations

from pydantic import BaseModel

from engine import JobContext, JobRegistry, Jobs, Worker, job
from tests.outbox.apptx import AppDatabase


class Order(BaseModel):
    order_id: int


def _declare(registry: JobRegistry, ran: list[int]) -> None:
    @job(idempotency_key=lambda i: f"order:{i.order_id}", registry=registry)
    async def confirm_order(input: Order, ctx: JobContext) -> None:
        ran.append(input.order_id)


async def _stage_committed(jobs: Jobs, app: AppDatabase, order_id: int) -> None:
    tx = await app.begin()
    await tx.insert_order(str(order_id))
    await jobs.stage(tx.handle, "confirm_order", {"order_id": order_id})
    await tx.commit()


async def test_a_committed_stage_runs_in_run_until_idle(
    jobs: Jobs, registry: JobRegistry, app: AppDatabase
) -> None:
    ran: list[int] = []
    _declare(registry, ran)
    await _stage_committed(jobs, app, 42)
    assert await Worker(jobs).run_until_idle() == 1
    assert ran == [42]
    (settled,) = (await jobs.list(name="confirm_order")).jobs
    assert settled.state == "done"


async def test_with_the_relay_off_the_stage_waits(
    jobs: Jobs, registry: JobRegistry, app: AppDatabase
) -> None:
    ran: list[int] = []
    _declare(registry, ran)
    await _stage_committed(jobs, app, 7)
    assert await Worker(jobs, outbox_relay=False).run_until_idle() == 0
    assert ran == [] and (await jobs.list(name="confirm_order")).jobs == []
