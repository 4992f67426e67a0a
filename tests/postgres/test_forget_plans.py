"""The pruner's batch deletes walk their partial index in the generic plan too (the plan a
pooled statement switches to after five runs): a batch reads the rows it deletes, not the table
kept. `= ANY(ARRAY(subquery))`, not `IN (subquery)`, whose generic plan hash-joined a scan of
the whole table to the batch."""

from __future__ import annotations

from typing import TypeAlias

import asyncpg

from engine.drivers.postgres import PostgresDriver
from tests.postgres.plan_probe import assert_a_batch_reads_its_rows

Conn: TypeAlias = "asyncpg.Connection[asyncpg.Record]"

OLD = 200  # rows past their keep
LIMIT = 50
BEFORE = 5_000_000  # the cutoff: the old rows are below it, the kept ones above
# A few index pages, then per row deleted its heap page and primary-key entry.
MAX_BUFFERS = 5 * LIMIT


async def test_a_batch_of_old_events_of_no_job_reads_its_rows_not_the_table(
    driver: PostgresDriver, sql: Conn
) -> None:
    """Events of no job go on `events_jobless_idx` (migration 20), never a job's events."""
    await sql.execute(
        """
        INSERT INTO mcp_jobs.events (job_id, at, kind)
        SELECT NULL, 1000 + g, 'mcp.call' FROM generate_series(1, $1::int) g
        UNION ALL
        SELECT NULL, 10000000 + g, 'mcp.call' FROM generate_series(1, 40000) g
        UNION ALL
        SELECT 'job1', g, 'note' FROM generate_series(1, 40000) g
        """,
        OLD,
    )
    query = driver.db.q["forget_jobless_events"]
    await assert_a_batch_reads_its_rows(
        sql, "mcp_jobs.events", query, "events_jobless_idx", BEFORE, LIMIT, max_buffers=MAX_BUFFERS
    )
    assert await driver.forget_jobless_events(BEFORE, LIMIT) == LIMIT
    assert await driver.count_jobless_events(BEFORE) == OLD - LIMIT


async def test_a_batch_of_old_published_outbox_rows_reads_its_rows_not_the_outbox(
    driver: PostgresDriver, sql: Conn
) -> None:
    """Published rows go on `outbox_published_idx` (migration 19), never waiting ones."""
    await sql.execute(
        """
        INSERT INTO mcp_jobs.outbox (id, staged_at, request, published_at)
        SELECT 'old' || g, g, '{}'::jsonb, 1000 + g FROM generate_series(1, $1::int) g
        UNION ALL
        SELECT 'new' || g, g, '{}'::jsonb, 10000000 + g FROM generate_series(1, 50000) g
        UNION ALL
        SELECT 'waiting' || g, g, '{}'::jsonb, NULL FROM generate_series(1, 50000) g
        """,
        OLD,
    )
    query = driver.db.q["outbox_forget_published"]
    await assert_a_batch_reads_its_rows(
        sql,
        "mcp_jobs.outbox",
        query,
        "outbox_published_idx",
        BEFORE,
        LIMIT,
        max_buffers=MAX_BUFFERS,
    )
    assert await driver.outbox_forget_published(BEFORE, LIMIT) == LIMIT
    left = await sql.fetchval("SELECT count(*) FROM mcp_jobs.outbox WHERE id LIKE 'old%'")
    assert left == OLD - LIMIT
