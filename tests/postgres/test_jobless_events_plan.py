"""Events of no job are deleted on their partial index (`events_jobless_idx`, migration 20): a
batch of the pruner's reads the rows it deletes, not the events kept (nor a job's events)."""

from __future__ import annotations

from typing import Any, TypeAlias

import asyncpg

from engine.drivers.postgres import PostgresDriver
from tests.postgres.plan_probe import generic_plan

Conn: TypeAlias = "asyncpg.Connection[asyncpg.Record]"

KEPT = 40_000  # events of no job, young
OF_A_JOB = 40_000  # old events of one job
OLD = 200  # events of no job, old
LIMIT = 50
# A batch on the index reads a few index pages, then per row deleted its primary-key entry
# and heap page (about 3 buffers a row); the table is several times that.
MAX_BUFFERS = 4 * LIMIT


def _nodes(plan: dict[str, Any]) -> list[dict[str, Any]]:
    return [plan, *(n for child in plan.get("Plans", []) for n in _nodes(child))]


async def test_a_batch_of_old_events_of_no_job_reads_its_rows_not_the_table(
    driver: PostgresDriver, sql: Conn
) -> None:
    await sql.execute(
        """
        INSERT INTO mcp_jobs.events (job_id, at, kind)
        SELECT NULL, 1000 + g, 'mcp.call' FROM generate_series(1, $1::int) g
        UNION ALL
        SELECT NULL, 10000000 + g, 'mcp.call' FROM generate_series(1, $2::int) g
        UNION ALL
        SELECT 'job1', g, 'note' FROM generate_series(1, $3::int) g
        """,
        OLD,
        KEPT,
        OF_A_JOB,
    )
    await sql.execute("VACUUM ANALYZE mcp_jobs.events")
    pages = await sql.fetchval(
        "SELECT relpages FROM pg_class WHERE oid = 'mcp_jobs.events'::regclass"
    )
    assert pages > 2 * MAX_BUFFERS  # so a scan of it could not pass
    plan = await generic_plan(sql, driver.db.q["forget_jobless_events"], None, 5_000_000, LIMIT)
    nodes = _nodes(plan)
    assert "Seq Scan" not in {n["Node Type"] for n in nodes}, nodes
    assert "events_jobless_idx" in {n.get("Index Name") for n in nodes}
    buffers = plan.get("Shared Hit Blocks", 0) + plan.get("Shared Read Blocks", 0)
    assert buffers < MAX_BUFFERS and plan["Actual Rows"] == 0
    assert await driver.forget_jobless_events(5_000_000, LIMIT) == LIMIT
    assert await driver.count_jobless_events(5_000_000) == OLD - LIMIT
