"""`stage(tx, ...)` with a connection to ANOTHER database than the jobs' is refused as SQLite
refuses it (OUTBOX_WRONG_DATABASE, terminal), whether that database has the jobs schema (the
row would be staged where no relay reads) or none (it was a retryable DRIVER_UNAVAILABLE whose
migrate fix changed nothing); nothing is staged anywhere."""

from __future__ import annotations

import asyncpg
import pytest

from engine import ManualClock
from engine.drivers.postgres import PostgresDriver
from engine.errors import JobsError
from tests.postgres.builders import request
from tests.support.postgres import fresh_database


@pytest.mark.parametrize("migrated", [True, False])
async def test_a_connection_to_another_database_is_refused(
    driver: PostgresDriver, clock: ManualClock, migrated: bool
) -> None:
    async with fresh_database(migrated=migrated) as other_url:
        other = await asyncpg.connect(other_url)
        try:
            async with other.transaction():
                with pytest.raises(JobsError) as raised:
                    await driver.outbox_stage(other, [request(clock.now_ms())])
                # The application's transaction is left usable: its own write may go on.
                assert await other.fetchval("SELECT 1") == 1
            assert (raised.value.code, raised.value.retryable) == ("OUTBOX_WRONG_DATABASE", False)
            if migrated:
                assert await other.fetchval('SELECT count(*) FROM "mcp_jobs".outbox') == 0
        finally:
            await other.close()
    assert await driver.outbox_claim("relay", "t", 10, 1_000) == []


async def test_a_pooled_connection_to_the_jobs_database_stages(
    driver: PostgresDriver, clock: ManualClock, pg_url: str
) -> None:
    pool = await asyncpg.create_pool(pg_url, min_size=1, max_size=1)
    try:
        for key in ("a", "b"):
            async with pool.acquire() as conn, conn.transaction():
                await driver.outbox_stage(conn, [request(clock.now_ms(), key=key)])
    finally:
        await pool.close()
    claimed = await driver.outbox_claim("relay", "t", 10, 1_000)
    assert sorted(r.request.idempotency_key for r in claimed) == ["a", "b"]
