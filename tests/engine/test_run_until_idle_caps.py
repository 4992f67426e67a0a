"""`run_until_idle()` runs every job that is due when a concurrency cap holds some of them back.

A job over a cap is shed in its place, and the worker's claims leave its cap's jobs alone while
the cap is full; a script or test calling `run_until_idle()` must still see every due job of a
capped name run, without moving the clock."""

from __future__ import annotations

import anyio
from pydantic import BaseModel

from engine import JobContext, JobRegistry, Jobs, Limits, ManualClock, Worker, job


class Item(BaseModel):
    n: int


async def test_run_until_idle_runs_every_due_job_of_a_capped_name(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    started: list[int] = []

    @job(name="one_at_a_time", concurrency=1, idempotency_key=lambda i: str(i.n), registry=registry)
    async def one_at_a_time(input: Item, ctx: JobContext) -> None:
        started.append(input.n)

    for n in range(6):
        await jobs.enqueue(one_at_a_time, {"n": n}, priority=n)
    worker = Worker(jobs, concurrency=4, scheduler=False, outbox_relay=False, prune=False)
    with anyio.fail_after(10):
        await worker.run_until_idle()
    # Each batch's bodies race for the one slot, so only the set is certain.
    assert sorted(started) == [0, 1, 2, 3, 4, 5]


async def test_run_until_idle_returns_when_a_cap_is_held_elsewhere(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    # The only slot is another process's: nothing here can start, so the call returns (no spin)
    # and the job stays ready, with no attempt spent.
    @job(name="capped", idempotency_key=lambda i: str(i.n), registry=registry)
    async def capped(input: Item, ctx: JobContext) -> None:
        raise AssertionError("ran over its queue's cap")

    r = await jobs.enqueue(capped, {"n": 1})
    await jobs.driver.acquire_slots("elsewhere", [("queue:default", 1)], clock.now_ms() + 60_000)
    worker = Worker(
        jobs, limits=Limits(per_queue={"default": 1}), scheduler=False, outbox_relay=False
    )
    with anyio.fail_after(10):
        await worker.run_until_idle()
    record = await jobs.get(r.id)
    assert (record.state, record.attempt) == ("ready", 0)
