"""The outbox on PostgreSQL: staged through the application's own transaction, published once."""

from __future__ import annotations

import asyncpg
import pytest

from engine import ManualClock
from engine.drivers.postgres import PostgresDriver
from engine.errors import JobsError
from tests.postgres.builders import request


async def test_staging_outside_a_transaction_is_refused(
    driver: PostgresDriver, clock: ManualClock, sql: asyncpg.Connection[asyncpg.Record]
) -> None:
    for tx, code in (
        (sql, "OUTBOX_NO_TX"),
        (object(), "INVALID_ARGUMENT"),
        (None, "INVALID_ARGUMENT"),
    ):
        with pytest.raises(JobsError) as raised:
            await driver.outbox_stage(tx, [request(clock.now_ms())])
        assert raised.value.code == code  # no connection at all: the wrong kind, not outside a tx
    assert await driver.outbox_claim("relay", "t", 10, 1_000) == []


async def test_staged_rows_exist_exactly_when_the_application_commits(
    driver: PostgresDriver, clock: ManualClock, sql: asyncpg.Connection[asyncpg.Record]
) -> None:
    now = clock.now_ms()
    with pytest.raises(RuntimeError):
        async with sql.transaction():
            await driver.outbox_stage(sql, [request(now, key="lost")])
            raise RuntimeError("the application's write failed")
    assert await driver.outbox_claim("relay", "t", 10, 1_000) == []
    async with sql.transaction():
        ids = await driver.outbox_stage(sql, [request(now, key="a"), request(now, key="b")])
        # Not visible to anyone until the application commits.
        assert await driver.outbox_claim("relay", "t", 10, 1_000) == []
    claimed = await driver.outbox_claim("relay", "t", 10, 1_000)
    # One transaction, one staged_at: the id breaks the tie, so the order is total.
    assert [r.id for r in claimed] == sorted(ids)
    assert {r.request.idempotency_key for r in claimed} == {"a", "b"}


async def test_publish_is_fenced_by_the_claim_and_happens_once(
    driver: PostgresDriver, clock: ManualClock, sql: asyncpg.Connection[asyncpg.Record]
) -> None:
    now = clock.now_ms()
    async with sql.transaction():
        await driver.outbox_stage(sql, [request(now, key="a"), request(now, key="b")])
    rows = await driver.outbox_claim("relay-1", "t1", 10, 1_000)
    assert await driver.outbox_claim("relay-2", "t2", 10, 1_000) == []  # held by t1
    assert await driver.outbox_publish("t2", rows) == []  # not t2's
    await driver.outbox_release("t2", [r.id for r in rows])  # not t2's to release either
    assert await driver.outbox_claim("relay-2", "t2", 10, 1_000) == []
    clock.advance(1_000)  # t1's claim expires; t2 takes the rows over
    taken = await driver.outbox_claim("relay-2", "t2", 10, 1_000)
    assert [r.id for r in taken] == [r.id for r in rows]
    assert await driver.outbox_publish("t1", rows) == []  # t1 lost them
    results = await driver.outbox_publish("t2", taken)
    assert [r.deduped for r in results] == [False, False]
    keys = [(await driver.get(r.id)).idempotency_key for r in results]
    assert sorted(keys) == ["a", "b"]
    assert await driver.outbox_publish("t2", taken) == []  # first writer wins
    published = await sql.fetch("SELECT published_at, job_id FROM mcp_jobs.outbox ORDER BY id")
    assert [(p["published_at"], p["job_id"]) for p in published] == [
        (clock.now_ms(), r.id) for r in results
    ]


async def test_a_publish_refused_by_dedupe_leaves_the_rows_unpublished(
    driver: PostgresDriver, clock: ManualClock, sql: asyncpg.Connection[asyncpg.Record]
) -> None:
    now = clock.now_ms()
    (holder,) = await driver.enqueue([request(now, key="held")])
    async with sql.transaction():
        await driver.outbox_stage(sql, [request(now, key="held", on_conflict="error")])
    rows = await driver.outbox_claim("relay", "t", 10, 1_000)
    with pytest.raises(JobsError) as raised:
        await driver.outbox_publish("t", rows)
    assert raised.value.code == "JOB_DUPLICATE"
    assert raised.value.details == {"job_id": holder.id}
    assert (
        await sql.fetchval("SELECT count(*) FROM mcp_jobs.outbox WHERE published_at IS NULL") == 1
    )
    await driver.outbox_release("t", [r.id for r in rows])
    assert [r.id for r in await driver.outbox_claim("relay", "t3", 10, 1_000)] == [rows[0].id]


async def test_a_connection_from_the_application_s_own_pool_can_stage(
    driver: PostgresDriver, clock: ManualClock, pg_url: str
) -> None:
    app_pool = await asyncpg.create_pool(pg_url, min_size=1, max_size=1)
    try:
        async with app_pool.acquire() as conn:
            with pytest.raises(JobsError) as raised:
                await driver.outbox_stage(conn, [request(clock.now_ms())])
            assert raised.value.code == "OUTBOX_NO_TX"
            async with conn.transaction():
                (staged,) = await driver.outbox_stage(conn, [request(clock.now_ms())])
    finally:
        await app_pool.close()
    assert [r.id for r in await driver.outbox_claim("relay", "t", 10, 1_000)] == [staged]
