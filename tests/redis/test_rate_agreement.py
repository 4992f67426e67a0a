"""Redis's rate limits agree with the memory driver's (which calls engine/rate_limits.py
directly) on every verdict, TAT and reservation over seeded random sequences of takes: one rule,
whatever stores it, `up_to` spares, reservations, adoption and void ones included."""

from __future__ import annotations

import asyncio
import random
from typing import cast

import pytest

from engine import Jobs, ManualClock
from engine.drivers import open_driver
from engine.drivers.base import RATES, RateStore
from engine.rate_limits import RateTake

pytest.importorskip("redis", reason="the redis extra is not installed")

RATE_A = RateTake("job:a", 3, 1_000, 2)
RATE_Q = RateTake("queue:q", 5, 2_000, 1)
CHOICES = ([RATE_A], [RATE_Q], [RATE_A, RATE_Q])
JOBS = [None, None, "j1", "j2", "j3", "j4"]


@pytest.mark.parametrize("seed", range(6))
async def test_takes_agree_with_the_memory_driver(
    jobs: Jobs, clock: ManualClock, seed: int
) -> None:
    redis_store = cast(RateStore, jobs.driver)
    memory = open_driver("memory://", clock=ManualClock())
    memory_store = cast(RateStore, memory)
    assert RATES.offered_by(jobs.driver) and RATES.offered_by(memory)
    rng = random.Random(seed)
    now = clock.now_ms()
    try:
        for _ in range(150):
            now += rng.choice([0, 0, 1, 50, 180, 333, 700, 2_500])
            takes = rng.choice(CHOICES)
            job_id = rng.choice(JOBS)
            up_to = rng.choice([1, 1, 2, 4])
            want = await memory_store.take_rates(takes, now, job_id, up_to)
            got = await redis_store.take_rates(takes, now, job_id, up_to)
            assert got == want, (now, takes, job_id, up_to)
            assert await redis_store.rate_states(10) == await memory_store.rate_states(10)
            reserved = await redis_store.rate_reservations(10)
            assert reserved == await memory_store.rate_reservations(10)
    finally:
        await memory.close()


async def test_racing_takes_admit_exactly_the_burst(jobs: Jobs, clock: ManualClock) -> None:
    # Concurrent takes on one key conflict under WATCH; those that lose read again, so the
    # burst is handed out once, not once per racer.
    store = cast(RateStore, jobs.driver)
    takes = [RateTake("job:burst", 3, 1_000, 3)]
    now = clock.now_ms()
    verdicts = await asyncio.gather(*(store.take_rates(takes, now) for _ in range(20)))
    assert sum(v.blocked_key is None for v in verdicts) == 3
    (state,) = await store.rate_states(10)
    assert state.tat == now * 1000 + 3 * 333_333
