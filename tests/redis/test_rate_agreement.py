"""Redis's rate limits agree with the memory driver's (which calls engine/rate_limits.py
directly) on every verdict, TAT and reservation over seeded random sequences of takes: one rule,
whatever stores it, `up_to` spares, reservations, adoption and void ones included."""

from __future__ import annotations

import asyncio
import random
from typing import cast

import pytest

from engine import Jobs, ManualClock
from engine.drivers import Driver, open_driver
from engine.drivers.base import RATES, RateStore
from engine.rate_limits import RateReservation, RateTake, RateVerdict

pytest.importorskip("redis", reason="the redis extra is not installed")

RATE_A = RateTake("job:a", 3, 1_000, 2)
RATE_Q = RateTake("queue:q", 5, 2_000, 1)
# An interval that is not a whole µs (1_001_000 / 7) and a burst of 3.
RATE_T = RateTake("tenant:t", 7, 1_001, 3)
CHOICES = ([RATE_A], [RATE_Q], [RATE_A, RATE_Q], [RATE_Q, RATE_T], [RATE_A, RATE_Q, RATE_T])
JOBS = [None, None, "j1", "j2", "j3", "j4", "j5", "j6"]


async def test_takes_agree_with_the_memory_driver(database_url: str) -> None:
    seen: set[str] = set()
    for seed in range(10):
        # Each seed on an empty store of each kind (its own key prefix, under the test's).
        redis = open_driver(f"{database_url}s{seed}:", clock=ManualClock())
        try:
            await _agree(redis, seed, seen)
        finally:
            await redis.close()
    # Every path of the rule was taken, so the agreement covers them all.
    assert seen >= {"used", "held by its reservation", "void", "adopted", "reserved", "spare"}


async def _agree(redis: Driver, seed: int, seen: set[str]) -> None:
    redis_store = cast(RateStore, redis)
    memory = open_driver("memory://", clock=ManualClock())
    memory_store = cast(RateStore, memory)
    assert RATES.offered_by(redis) and RATES.offered_by(memory)
    rng = random.Random(seed)
    now = ManualClock().now_ms()
    try:
        for _ in range(200):
            now += rng.choice([0, 0, 1, 50, 60, 180, 333, 700, 2_500])
            takes = rng.choice(CHOICES)
            job_id = rng.choice(JOBS)
            up_to = rng.choice([1, 1, 2, 4, 9])
            before = {r.job_id: r for r in await memory_store.rate_reservations(50)}
            want = await memory_store.take_rates(takes, now, job_id, up_to)
            got = await redis_store.take_rates(takes, now, job_id, up_to)
            assert got == want, (seed, now, takes, job_id, up_to)
            assert await redis_store.rate_states(10) == await memory_store.rate_states(10)
            reserved = await redis_store.rate_reservations(50)
            assert reserved == await memory_store.rate_reservations(50)
            seen |= _paths(before, {r.job_id for r in reserved}, want, job_id, now)
            seen |= {"spare"} if want.spare else set()
    finally:
        await memory.close()


def _paths(
    before: dict[str, RateReservation],
    after: set[str],
    verdict: RateVerdict,
    job_id: str | None,
    now: int,
) -> set[str]:
    paths = set()
    own = before.get(job_id or "")
    if own is not None and own.late_at >= now:
        paths.add("used" if verdict.blocked_key is None else "held by its reservation")
    gone = [r for i, r in before.items() if i not in after and i != job_id]
    if any(r.late_at < now for r in gone):
        paths.add("void")
    if any(r.late_at >= now for r in gone):
        paths.add("adopted")
    if job_id is not None and verdict.blocked_key is not None and job_id in after:
        paths.add("reserved")
    return paths


async def test_racing_takes_admit_exactly_the_burst(jobs: Jobs, clock: ManualClock) -> None:
    # Concurrent takes on one key: each is one script, run alone, so the burst is handed out
    # once, not once per racer.
    store = cast(RateStore, jobs.driver)
    takes = [RateTake("job:burst", 3, 1_000, 3)]
    now = clock.now_ms()
    verdicts = await asyncio.gather(*(store.take_rates(takes, now) for _ in range(20)))
    assert sum(v.blocked_key is None for v in verdicts) == 3
    (state,) = await store.rate_states(10)
    assert state.tat == now * 1000 + 3 * 333_333
