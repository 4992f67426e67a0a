"""A job's wait (`queued_at`: the oldest-ready age of stats, the metrics gauge and diagnose's
BACKLOG_OLD, a claim's `waited_ms`) counts from when it could first be claimed after it was made:
max(run_at, created_at). A `run_at` in the past still runs now, keeps its place in the claim
order, and is shown as given; it no longer makes a job minutes old look years old."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from engine import Enqueue, JobContext, JobRegistry, Jobs, ManualClock, job

DAY_MS = 86_400_000


class Item(BaseModel):
    n: int


@pytest.fixture(autouse=True)
def declared_jobs(registry: JobRegistry) -> None:
    @job(idempotency_key=lambda i: f"k{i.n}", registry=registry)
    async def work(input: Item, ctx: JobContext) -> None:
        return None


async def test_a_past_run_at_waits_from_its_enqueue_not_from_that_time(
    jobs: Jobs, clock: ManualClock
) -> None:
    made = clock.now_ms()
    past = made - 365 * DAY_MS
    single = await jobs.enqueue("work", {"n": 1}, run_at=past)
    (batched,) = await jobs.enqueue_many([Enqueue("work", {"n": 2}, run_at=past)])
    for result in (single, batched):
        record = await jobs.get(result.id)
        assert (record.state, record.run_at) == ("ready", past)  # shown as given, due now
        assert record.queued_at == record.created_at == made
    (stats,) = await jobs.stats()
    assert (stats.ready, stats.oldest_ready_ms) == (2, 0)
    clock.advance(5_000)
    (stats,) = await jobs.stats()
    assert stats.oldest_ready_ms == 5_000


async def test_a_past_run_at_keeps_its_place_in_the_claim_order(
    jobs: Jobs, clock: ManualClock
) -> None:
    await jobs.enqueue("work", {"n": 1})
    clock.advance(1_000)
    await jobs.enqueue("work", {"n": 2}, run_at=clock.now_ms() - DAY_MS)
    claimed = await jobs.driver.claim("w1", 2, 60_000)
    assert [c.record.input["n"] for c in claimed] == [2, 1]


async def test_a_future_run_at_still_waits_from_that_time(jobs: Jobs, clock: ManualClock) -> None:
    later = clock.now_ms() + 60_000
    result = await jobs.enqueue("work", {"n": 1}, run_at=later)
    assert (await jobs.get(result.id)).queued_at == later
    clock.advance(90_000)
    (stats,) = await jobs.stats()
    assert stats.oldest_ready_ms == 30_000
