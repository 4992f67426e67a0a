"""Settles NOTIFY the changes channel only while a process follows changes: a NOTIFY takes a
lock that serialises committing transactions, so a worker pays it only when a subscriber waits
(a live `followers:` lease, read at the worker's presence beat)."""

from __future__ import annotations

import anyio
import asyncpg

from engine import ManualClock
from engine.drivers.base import AckWrite
from engine.drivers.postgres import PostgresDriver
from engine.presence import EXPIRED_PER_BEAT, WORKER_EXPIRY_MS
from schemas.stats import WorkerInfo
from tests.postgres.builders import request

SENTINEL = "sentinel"


async def _settle_one(driver: PostgresDriver, key: str, now: int) -> None:
    await driver.enqueue([request(now, key=key)])
    (claimed,) = await driver.claim("w", 1, 60_000)
    assert await driver.ack_many([AckWrite(claimed.record.id, claimed.token, None)]) == [None]


async def _beat(driver: PostgresDriver, now: int) -> None:
    info = WorkerInfo(
        id="w", hostname="h", pid=1, queues=None, concurrency=1, started_at=now, last_seen_at=now
    )
    await driver.worker_seen(info)


async def test_a_settle_notifies_only_while_a_process_follows_changes(
    driver: PostgresDriver, clock: ManualClock, sql: asyncpg.Connection[asyncpg.Record]
) -> None:
    heard: list[str] = []
    got = anyio.Event()

    def on_notify(*args: object) -> None:
        heard.append(str(args[-1]))
        got.set()

    channel = driver.db.changes_channel
    await sql.add_listener(channel, on_notify)
    now = clock.now_ms()
    try:
        # Nobody follows: the beat says so, and the settle sends nothing before the sentinel.
        await _beat(driver, now)
        await _settle_one(driver, "a", now)
        await sql.execute("SELECT pg_notify($1, $2)", channel, SENTINEL)
        with anyio.fail_after(10):
            await got.wait()
        assert heard == [SENTINEL]

        # A follower waits (its lease is taken), the worker's next beat reads it: now it does.
        await driver.wait_for_change(0, 0)
        await _beat(driver, now)
        heard.clear()
        got = anyio.Event()
        await _settle_one(driver, "b", now)
        with anyio.fail_after(10):
            await got.wait()
        assert heard == [""]
    finally:
        await sql.remove_listener(channel, on_notify)


async def test_a_beat_deletes_the_leases_of_followers_gone_an_hour(
    driver: PostgresDriver, clock: ManualClock, sql: asyncpg.Connection[asyncpg.Record]
) -> None:
    """Every MCP server that followed changes named a lease of its own; the beats delete those
    that expired an hour ago (a hundred a beat), so the check reads the followers of late."""
    now = clock.now_ms()
    stale = now - WORKER_EXPIRY_MS - 1
    await sql.executemany(
        "INSERT INTO mcp_jobs.leaders (name, holder, expires_at) VALUES ($1, $1, $2)",
        [(f"followers:gone{n:03}", stale) for n in range(EXPIRED_PER_BEAT + 20)]
        + [("followers:late", now - 1_000), ("prune", stale)],
    )
    await driver.wait_for_change(0, 0)  # this process follows: its lease is live
    await _beat(driver, now)
    await _beat(driver, now)
    names = {r["name"] for r in await sql.fetch("SELECT name FROM mcp_jobs.leaders")}
    # The expired-a-while-ago ones are gone; one expired a second ago and other leases stay.
    assert names == {"followers:late", "prune", driver._follower}  # pyright: ignore[reportPrivateUsage]
    assert driver.db.changes_followed
