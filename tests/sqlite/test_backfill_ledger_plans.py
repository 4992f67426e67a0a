"""The backfill ledger is kept, so its reads cost their page (SQLite): one backfill's runs in
one environment, the next page, and the newest of one status each search an index that holds
the order (EXPLAIN QUERY PLAN: no scan, no sort), whatever the ledger holds."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine import ManualClock
from engine.drivers.base import RunPosition
from engine.drivers.sqlite import SqliteDriver
from engine.drivers.sqlite import queries as q
from engine.drivers.sqlite.library import sqlite3

RUNS = 20_000


@pytest.mark.parametrize("status", [False, True], ids=["newest", "of-one-status"])
@pytest.mark.parametrize("before", [False, True], ids=["first-page", "next-page"])
async def test_a_ledger_page_searches_an_index_in_order(
    tmp_path: Path, clock: ManualClock, status: bool, before: bool
) -> None:
    path = tmp_path / "jobs.db"
    driver = SqliteDriver(str(path), clock=clock)
    await driver.migrate()
    await driver.close()
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute(
        """
        WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < :count)
        INSERT INTO mcp_jobs_backfills (run_id, name, checksum, environment, status,
            rows_processed, started_at)
        SELECT printf('%012d', n), CASE WHEN n % 4 = 0 THEN 'other' ELSE 'fill' END, 'c',
               CASE WHEN n % 4 = 1 THEN 'staging' ELSE 'production' END,
               CASE WHEN n = 2 THEN 'completed' ELSE 'failed' END, n, 1000 + n / 2
          FROM g
        """,
        {"count": RUNS},
    )
    conn.execute("ANALYZE")
    sql = q.select_backfills_sql(True, True, status, before, True)
    params = {
        "name": "fill",
        "environment": "production",
        "status": "completed",
        "before_at": 5_000,
        "before_id": "000000008000",
        "limit": 21,
    }
    plan = " | ".join(row[-1] for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}", params))
    index = "mcp_jobs_backfills_status" if status else "mcp_jobs_backfills_newest"
    assert f"SEARCH mcp_jobs_backfills USING INDEX {index} (" in plan, plan
    assert "TEMP B-TREE" not in plan and "SCAN" not in plan, plan
    conn.close()

    driver = SqliteDriver(str(path), clock=clock)
    try:
        found = await driver.backfill_runs(
            "fill",
            "production",
            status="completed" if status else None,
            before=RunPosition(5_000, "000000008000") if before else None,
            limit=3,
        )
    finally:
        await driver.close()
    expected = {
        (False, False): ["000000019999", "000000019998", "000000019995"],
        (False, True): ["000000007999", "000000007998", "000000007995"],
        (True, False): ["000000000002"],
        (True, True): ["000000000002"],
    }
    assert [r.run_id for r in found] == expected[(status, before)]
