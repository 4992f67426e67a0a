"""A store reset (a server restarted with no persistence, FLUSHDB) under a worker that held
none of its jobs at that moment: every job stored there is gone, and only a worker whose held
jobs vanished used to say so. The idle worker said "the database answers again" and nothing
else, the CLI and `diagnose` answered an empty, healthy store. Its presence beat now sees the
version key it saw before gone and logs the same ERROR, once per reset."""

from __future__ import annotations

import logging
from typing import cast

import pytest

from engine import ManualClock
from engine.drivers import open_driver
from schemas.stats import WorkerInfo

pytest.importorskip("redis", reason="the redis extra is not installed")

from redis.asyncio import Redis

from engine.drivers.redis import RedisDriver
from engine.drivers.redis.lost import QUIET_MS

RESET = "appears to have been reset"


def _errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "mcp_jobs.redis" and r.levelno == logging.ERROR
    ]


def _info(now: int) -> WorkerInfo:
    return WorkerInfo(
        id="w1",
        hostname="h",
        pid=1,
        queues=None,
        concurrency=1,
        started_at=now,
        last_seen_at=now,
    )


async def _flush(client: Redis, prefix: str) -> None:
    """FLUSHDB, as far as this test's own prefix goes (the test server is shared)."""
    async for key in client.scan_iter(match=f"{prefix}*", count=1_000):
        await client.delete(key)


async def test_an_idle_worker_says_the_store_was_reset(
    database_url: str, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    driver = cast(RedisDriver, open_driver(database_url, clock=clock))
    other = Redis.from_url(database_url.partition("?")[0], decode_responses=True)
    try:
        await driver.migrate()
        caplog.set_level(logging.ERROR, logger="mcp_jobs.redis")
        await driver.worker_seen(_info(clock.now_ms()))
        assert _errors(caplog) == []

        await _flush(other, driver.prefix)
        await driver.worker_seen(_info(clock.now_ms()))
        (error,) = _errors(caplog)
        assert RESET in error and f"{driver.prefix}epoch" in error
        assert "every job stored there is lost" in error

        # Once per reset: the next beats of the same empty store add no line.
        await driver.worker_seen(_info(clock.now_ms()))
        assert len(_errors(caplog)) == 1

        # Opened again (a migrate puts its version key back), a later reset is told too.
        clock.advance(QUIET_MS)
        await driver.migrate()
        await driver.worker_seen(_info(clock.now_ms()))
        await _flush(other, driver.prefix)
        await driver.worker_seen(_info(clock.now_ms()))
        assert len(_errors(caplog)) == 2

        # Also where another process opened the emptied store before this one's next beat
        # (an enqueue from the app connects and migrates): the version key is back by then.
        clock.advance(QUIET_MS)
        await driver.migrate()
        await driver.worker_seen(_info(clock.now_ms()))
        await _flush(other, driver.prefix)
        opener = open_driver(database_url, clock=clock)
        try:
            await opener.migrate()
        finally:
            await opener.close()
        await driver.worker_seen(_info(clock.now_ms()))
        assert len(_errors(caplog)) == 3
        assert RESET in _errors(caplog)[2]
    finally:
        await other.aclose()
        await driver.close()
