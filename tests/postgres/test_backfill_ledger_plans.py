"""The backfill ledger is kept, so its reads cost their page: on a ledger of many runs, the newest
runs of one backfill in one environment, the next page, and the newest completed run each descend
an index in order (EXPLAIN ANALYZE, BUFFERS), never sort or scan the ledger."""

from __future__ import annotations

import json
from typing import Any, TypeAlias

import asyncpg

from engine.drivers.base import RunPosition
from engine.drivers.postgres import PostgresDriver

RUNS = 20_000  # one name, one environment: failed runs over one old completed one
MAX_BUFFERS = 20

Conn: TypeAlias = "asyncpg.Connection[asyncpg.Record]"


def _walk(node: dict[str, Any]) -> list[dict[str, Any]]:
    found = [node]
    for child in node.get("Plans", []):
        found += _walk(child)
    return found


async def test_a_ledger_page_descends_an_index(driver: PostgresDriver, sql: Conn) -> None:
    await sql.execute(
        """
        INSERT INTO mcp_jobs.backfills (run_id, name, checksum, environment, status,
            rows_processed, started_at)
        SELECT lpad(g::text, 12, '0'), CASE WHEN g % 4 = 0 THEN 'other' ELSE 'fill' END, 'c',
               CASE WHEN g % 4 = 1 THEN 'staging' ELSE 'production' END,
               CASE WHEN g = 2 THEN 'completed' ELSE 'failed' END, g, 1000 + g / 2
          FROM generate_series(1, $1::int) AS g
        """,
        RUNS,
    )
    await sql.execute("VACUUM ANALYZE mcp_jobs.backfills")
    q = driver.db.q
    for query, args, index in (
        (q["backfill_runs_of"], ("fill", "production", 21), "backfills_newest_idx"),
        (
            q["backfill_runs_of_before"],
            ("fill", "production", 5_000, "000000008000", 21),
            "backfills_newest_idx",
        ),
        (q["backfill_status_of"], ("fill", "production", "completed", 1), "backfills_status_idx"),
        (
            q["backfill_status_of_before"],
            ("fill", "production", "completed", 5_000, "000000008000", 21),
            "backfills_status_idx",
        ),
    ):
        raw = await sql.fetchval(f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {query}", *args)
        (plan,) = json.loads(raw)
        nodes = _walk(plan["Plan"])
        kinds = {n["Node Type"] for n in nodes}
        indexes = {n["Index Name"] for n in nodes if "Index Name" in n}
        buffers = plan["Plan"].get("Shared Hit Blocks", 0) + plan["Plan"].get(
            "Shared Read Blocks", 0
        )
        assert "Seq Scan" not in kinds and "Sort" not in kinds, (query, kinds)
        assert indexes == {index}, (query, indexes)
        assert buffers < MAX_BUFFERS, (query, buffers)

    (completed,) = await driver.backfill_runs("fill", "production", status="completed", limit=1)
    assert completed.run_id == "000000000002"
    page = await driver.backfill_runs(
        "fill", "production", before=RunPosition(5_000, "000000008000"), limit=3
    )
    assert [r.run_id for r in page] == ["000000007999", "000000007998", "000000007995"]
