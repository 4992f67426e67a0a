"""Published outbox rows past their keep are deleted on `outbox_published_idx` (migration 19)
in the generic plan too: a batch reads the rows it deletes, not the outbox kept."""

from __future__ import annotations

from typing import Any, TypeAlias

import asyncpg

from engine.drivers.postgres import PostgresDriver
from tests.postgres.plan_probe import generic_plan

Conn: TypeAlias = "asyncpg.Connection[asyncpg.Record]"

KEPT = 100_000  # published recently, and waiting rows
OLD = 200  # published long ago
LIMIT = 50
MAX_BUFFERS = 5 * LIMIT  # a few index pages, then per row its heap page and primary-key entry


def _nodes(plan: dict[str, Any]) -> list[dict[str, Any]]:
    return [plan, *(n for child in plan.get("Plans", []) for n in _nodes(child))]


async def test_a_batch_of_old_published_rows_reads_its_rows_not_the_outbox(
    driver: PostgresDriver, sql: Conn
) -> None:
    await sql.execute(
        """
        INSERT INTO mcp_jobs.outbox (id, staged_at, request, published_at)
        SELECT 'old' || g, g, '{}'::jsonb, 1000 + g FROM generate_series(1, $1::int) g
        UNION ALL
        SELECT 'new' || g, g, '{}'::jsonb, 10000000 + g FROM generate_series(1, $2::int) g
        UNION ALL
        SELECT 'waiting' || g, g, '{}'::jsonb, NULL FROM generate_series(1, $2::int) g
        """,
        OLD,
        KEPT // 2,
    )
    await sql.execute("VACUUM ANALYZE mcp_jobs.outbox")
    pages = await sql.fetchval(
        "SELECT relpages FROM pg_class WHERE oid = 'mcp_jobs.outbox'::regclass"
    )
    assert pages > 2 * MAX_BUFFERS  # so a scan of it could not pass
    plan = await generic_plan(sql, driver.db.q["outbox_forget_published"], None, 5_000_000, LIMIT)
    nodes = _nodes(plan)
    assert "Seq Scan" not in {n["Node Type"] for n in nodes}, nodes
    assert "outbox_published_idx" in {n.get("Index Name") for n in nodes}
    buffers = plan.get("Shared Hit Blocks", 0) + plan.get("Shared Read Blocks", 0)
    assert buffers < MAX_BUFFERS, buffers
    assert await driver.outbox_forget_published(5_000_000, LIMIT) == LIMIT
    left = await sql.fetchval("SELECT count(*) FROM mcp_jobs.outbox WHERE id LIKE 'old%'")
    assert left == OLD - LIMIT
