"""A dead worker's presence row expires: the next beat of any live worker deletes it, on every
driver, by the one rule in `engine.presence`."""

from __future__ import annotations

from engine import Jobs, ManualClock
from engine.presence import WORKER_EXPIRY_MS, expired_before, is_expired
from schemas.stats import WorkerInfo


def seen(worker_id: str, at: int) -> WorkerInfo:
    return WorkerInfo(
        id=worker_id,
        hostname="host",
        pid=1,
        queues=None,
        concurrency=1,
        started_at=at,
        last_seen_at=at,
    )


def test_a_row_expires_once_it_is_older_than_the_bound() -> None:
    now = 10 * WORKER_EXPIRY_MS
    assert expired_before(now) == now - WORKER_EXPIRY_MS
    assert not is_expired(now - WORKER_EXPIRY_MS, now)
    assert is_expired(now - WORKER_EXPIRY_MS - 1, now)


async def test_another_workers_beat_deletes_an_expired_row_and_keeps_a_fresh_one(
    jobs: Jobs, clock: ManualClock
) -> None:
    driver = jobs.driver
    start = clock.now_ms()
    await driver.worker_seen(seen("dead", start))
    clock.advance(1)
    await driver.worker_seen(seen("quiet", clock.now_ms()))
    clock.set(start + WORKER_EXPIRY_MS + 1)  # "dead" is 1 ms past the bound, "quiet" exactly at it
    assert {w.id for w in await driver.live_workers(0)} == {"dead", "quiet"}  # nothing beat yet

    await driver.worker_seen(seen("alive", clock.now_ms()))

    assert [w.id for w in await driver.live_workers(0)] == ["quiet", "alive"]
