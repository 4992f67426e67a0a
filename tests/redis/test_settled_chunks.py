"""Redis's settled counts walk the `settled` zset in chunks: a chunk may end inside a batch of
acks that share one `finished_at`, and the next chunk resumes after exactly the members read."""

from __future__ import annotations

import pytest

from engine import Jobs, ManualClock
from engine.drivers.redis import settled_counts
from engine.testing.kit.test_settled_counts import counts, settle
from schemas.stats import SettledCount


async def test_chunks_split_inside_one_instant_count_each_job_once(
    jobs: Jobs, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(settled_counts, "CHUNK", 3)
    t0 = clock.now_ms()
    await settle(jobs.driver, "done", 7)  # one instant, across three chunks
    clock.advance(1)
    await settle(jobs.driver, "done", 2, queue="beta")
    clock.advance(1)
    await settle(jobs.driver, "failed", 3)  # ends a chunk exactly: one more empty read
    clock.advance(1)
    await settle(jobs.driver, "done", 5)  # outside [t0, t0 + 3)
    assert await counts(jobs, t0, t0 + 3) == {
        "alpha": SettledCount(done=7, failed=3),
        "beta": SettledCount(done=2),
    }
    assert await counts(jobs, t0 + 1, t0 + 4) == {
        "alpha": SettledCount(done=5, failed=3),
        "beta": SettledCount(done=2),
    }
