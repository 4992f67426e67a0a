"""Priority (engine/rules.py claim_rank): higher priority is claimed first, FIFO within one, a
priority point is worth PRIORITY_STEP_MS of waiting (so nothing starves), declared per job and
overridable per enqueue, and every driver claims in the order the rule sorts."""

from __future__ import annotations

import random

import pytest
from pydantic import BaseModel

from engine import Enqueue, JobContext, JobRegistry, Jobs, ManualClock, job, rules
from engine.declare import JobDefinition
from engine.errors import InvalidArgumentError, JobDeclarationInvalidError
from schemas.jobs import NackOptions

LEASE_MS = 60_000
STEP = rules.PRIORITY_STEP_MS


class Item(BaseModel):
    n: int


def _declare(registry: JobRegistry, priority: int = 0) -> JobDefinition[Item]:
    @job(idempotency_key=lambda i: f"k{i.n}", priority=priority, registry=registry)
    async def work(input: Item, ctx: JobContext) -> None:
        return None

    return work


async def _claim_order(jobs: Jobs, batch: int = 1) -> list[int]:
    """Every claimable job's `n`, in the order claims take them, `batch` per claim."""
    order: list[int] = []
    while claimed := await jobs.driver.claim("w1", batch, LEASE_MS):
        order.extend(c.record.input["n"] for c in claimed)
    return order


async def test_higher_priority_is_claimed_first_and_fifo_within_one(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    work = _declare(registry)
    for n, priority in enumerate([0, 5, 0, 10, 5, 0]):
        await jobs.enqueue(work, {"n": n}, priority=priority)
        clock.advance(1)
    assert await _claim_order(jobs) == [3, 1, 4, 0, 2, 5]


async def test_a_claim_batch_takes_the_same_order(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    work = _declare(registry)
    priorities = [2, 0, 7, 7, 1, 0, 10, 3]
    await jobs.enqueue_many([Enqueue(work, {"n": n}, priority=p) for n, p in enumerate(priorities)])
    claimed = await jobs.driver.claim("w1", 5, LEASE_MS)
    # One instant: by priority, then id (ids grow with the batch order).
    assert [c.record.input["n"] for c in claimed] == [6, 2, 3, 7, 0]


async def test_a_priority_point_is_worth_one_step_of_waiting(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    """The documented bound: a job ready at t goes before a higher one made ready after
    t + (difference) * PRIORITY_STEP_MS, so a low priority job is never starved."""
    work = _declare(registry)
    await jobs.enqueue(work, {"n": 0})  # priority 0, ready at t
    clock.advance(2 * STEP + 1)
    await jobs.enqueue(work, {"n": 1}, priority=2)  # its head start falls short by 1 ms
    await jobs.enqueue(work, {"n": 2}, priority=3)  # a step more: ahead
    assert await _claim_order(jobs) == [2, 0, 1]


async def test_the_declared_priority_is_the_default_and_an_enqueue_overrides_it(
    jobs: Jobs, registry: JobRegistry
) -> None:
    work = _declare(registry, priority=4)
    first = await jobs.enqueue(work, {"n": 1})
    second = await jobs.enqueue(work, {"n": 2}, priority=9)
    third = await jobs.enqueue(work, {"n": 3}, priority=0)
    got = [(await jobs.get(r.id)).priority for r in (first, second, third)]
    assert got == [4, 9, 0]
    (descriptor,) = await jobs.describe("work")
    assert descriptor.priority == 4


async def test_a_delayed_high_priority_job_waits_for_its_time(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    work = _declare(registry)
    await jobs.enqueue(work, {"n": 1}, priority=10, delay=30)
    await jobs.enqueue(work, {"n": 2})
    assert await _claim_order(jobs) == [2]
    clock.advance(30_000)  # within job 2's lease
    assert await _claim_order(jobs) == [1]


async def test_a_retried_job_keeps_its_priority(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    work = _declare(registry)
    done = await jobs.enqueue(work, {"n": 1}, priority=7)
    (claimed,) = await jobs.driver.claim("w1", 1, LEASE_MS)
    await jobs.driver.nack(done.id, claimed.token, NackOptions(delay_ms=0))
    await jobs.enqueue(work, {"n": 2}, priority=6)
    assert await _claim_order(jobs) == [1, 2]
    assert (await jobs.get(done.id)).priority == 7


@pytest.mark.parametrize("bad", [-1, 11, 2.5, True, "5", None])
async def test_a_priority_out_of_range_is_refused_and_nothing_is_written(
    jobs: Jobs, registry: JobRegistry, bad: object
) -> None:
    work = _declare(registry)
    if bad is None:  # None means "the declared one": accepted
        await jobs.enqueue(work, {"n": 1}, priority=bad)
        return
    with pytest.raises(InvalidArgumentError) as caught:
        await jobs.enqueue(work, {"n": 1}, priority=bad)  # type: ignore[arg-type]
    assert (caught.value.details or {}).get("argument") == "priority"
    with pytest.raises(InvalidArgumentError):
        await jobs.enqueue_many([Enqueue(work, {"n": 2}), Enqueue(work, {"n": 3}, priority=bad)])  # type: ignore[arg-type]
    assert (await jobs.list()).jobs == []


@pytest.mark.parametrize("bad", [-1, 11, 1.5, "high"])
def test_a_declared_priority_out_of_range_is_a_declaration_error(
    registry: JobRegistry, bad: object
) -> None:
    with pytest.raises(JobDeclarationInvalidError) as caught:
        _declare(registry, priority=bad)  # type: ignore[arg-type]
    assert "priority" in caught.value.cause


@pytest.mark.parametrize("seed", range(3))
async def test_every_driver_claims_in_the_order_the_rule_sorts(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock, seed: int
) -> None:
    """Random priorities and due times spread over several steps (some not due yet): the claims
    take exactly the claimable rows, in rules.claim_rank order."""
    work = _declare(registry)
    rng = random.Random(seed)
    start = clock.now_ms()
    items = [
        Enqueue(
            work,
            {"n": n},
            priority=rng.randint(rules.PRIORITY_MIN, rules.PRIORITY_MAX),
            run_at=start + rng.randrange(0, 4 * STEP, 1_000),
        )
        for n in range(60)
    ]
    await jobs.enqueue_many(items)
    clock.advance(3 * STEP)
    now = clock.now_ms()
    records = (await jobs.list(limit=100)).jobs
    expected = [
        r.input["n"] for r in sorted(records, key=rules.claim_rank) if rules.is_claimable(r, now)
    ]
    assert 0 < len(expected) < len(items)
    assert await _claim_order(jobs, batch=7) == expected
