"""Reads cost what is live, not what ever ran (SQLite): on a file of many settled rows and few
live ones, each read searches the index meant for it (EXPLAIN QUERY PLAN), never scans the jobs
table, and runs a bounded number of VM instructions."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest

from engine import ManualClock
from engine.drivers.sqlite import SqliteDriver
from engine.drivers.sqlite import queries as q
from engine.drivers.sqlite.library import sqlite3
from engine.drivers.sqlite.lifecycle import stats_params

SETTLED = 50_000
# A scan of the jobs table at this size runs millions of VM instructions; counted in steps of
# 1,000, a read that costs its page, the live rows and the dead ones stays under this.
MAX_KILO_STEPS = 200


async def _build(tmp_path: Path, clock: ManualClock) -> sqlite3.Connection:
    path = tmp_path / "jobs.db"
    driver = SqliteDriver(str(path), clock=clock)
    await driver.migrate()
    await driver.close()
    conn = sqlite3.connect(path, isolation_level=None)
    old = clock.now_ms() - 30 * 86_400_000
    conn.execute(
        """
        WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < :count)
        INSERT INTO mcp_jobs_jobs (id, run_id, name, queue, tenant_id, idempotency_key, input,
            state, max_attempts, run_at, queued_at, created_at, updated_at, finished_at)
        SELECT printf('%012d', n), 'r' || n, 'hist' || (n % 2), 'default', 't' || (n % 2),
               'k' || n, '{}', CASE WHEN n % 1000 = 0 THEN 'dead' ELSE 'done' END,
               3, :old, :old, :old, :old, :old + n
          FROM g
        """,
        {"count": SETTLED, "old": old},
    )
    conn.execute(
        """
        WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < 30)
        INSERT INTO mcp_jobs_jobs (id, run_id, name, queue, tenant_id, idempotency_key, input,
            state, max_attempts, run_at, queued_at, created_at, updated_at)
        SELECT 'z' || printf('%011d', n), 'live' || n, 'hist0', 'default', 't0', 'live' || n,
               '{}', 'ready', 3, :now, :now, :now, :now
          FROM g
        """,
        {"now": clock.now_ms()},
    )
    conn.execute("ANALYZE")
    return conn


def _plan(conn: sqlite3.Connection, sql: str, params: Mapping[str, object]) -> list[str]:
    return [row[-1] for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}", params)]


def _kilo_steps(conn: sqlite3.Connection, sql: str, params: Mapping[str, object]) -> int:
    steps = [0]

    def tick() -> int:
        steps[0] += 1
        return 0

    conn.set_progress_handler(tick, 1_000)
    try:
        conn.execute(sql, params).fetchall()
    finally:
        conn.set_progress_handler(None, 0)
    return steps[0]


def _no_table_scan(plan: list[str]) -> None:
    assert not [p for p in plan if p.startswith("SCAN mcp_jobs_jobs") and "INDEX" not in p], plan


async def test_stats_search_the_live_and_settled_indexes(
    tmp_path: Path, clock: ManualClock
) -> None:
    conn = await _build(tmp_path, clock)
    now = clock.now_ms()
    for queues, tenant in ((None, None), (["default"], None), (None, "t0")):
        params = stats_params(now, queues, tenant)
        plan = _plan(conn, q.STATS, params)
        _no_table_scan(plan)
        joined = "\n".join(plan)
        for index in ("mcp_jobs_jobs_live", "mcp_jobs_jobs_settled ", "mcp_jobs_jobs_unknown"):
            assert index in joined + " ", (index, plan)
        assert _kilo_steps(conn, q.STATS, params) < MAX_KILO_STEPS


FILTERS = [
    ({"states": ("dead",)}),
    ({"states": ("failed",)}),
    ({"states": ("ready",)}),
    ({"states": ("done", "dead")}),
    ({"name": "hist1"}),
    ({"name": "nosuch"}),
    ({"queue": "default"}),
    ({"queue": "nosuch"}),
    ({"tenant_id": "t1"}),
    ({"tenant_id": "nosuch"}),
    ({"states": ("dead",), "name": "nosuch"}),
    ({"states": ("done",), "tenant_id": "t0", "cursor": "000000030000"}),
]


@pytest.mark.parametrize("given", FILTERS, ids=repr)
async def test_each_list_filter_searches_an_index(
    tmp_path: Path, clock: ManualClock, given: dict[str, object]
) -> None:
    conn = await _build(tmp_path, clock)
    args = {k: given.get(k) for k in ("states", "name", "queue", "tenant_id", "cursor")}
    sql = q.list_jobs_sql(**args)  # type: ignore[arg-type]
    params = {k: v for k, v in args.items() if k != "states"} | {"limit": 51}
    plan = _plan(conn, sql, params)
    _no_table_scan(plan)
    assert _kilo_steps(conn, sql, params) < MAX_KILO_STEPS, plan


@pytest.mark.parametrize(
    "given",
    [{"name": "hist1", "tenant_id": "t0"}, {"queue": "default", "name": "nosuch"}],
    ids=repr,
)
async def test_a_second_filter_is_tested_before_the_row_is_read(
    tmp_path: Path, clock: ManualClock, given: dict[str, object]
) -> None:
    """Two filters whose combination is rare walk the leading filter's settled entries. Each
    filter's index ends with the others, so SQLite tests them on the entry and reads a row only
    when it matches: in the program, the first column read after each deferred seek of the row
    comes from the index cursor, not the table's (113 ms became 17 ms at 100,000 entries)."""
    conn = await _build(tmp_path, clock)
    args = {k: given.get(k) for k in ("states", "name", "queue", "tenant_id", "cursor")}
    sql = q.list_jobs_sql(**args)  # type: ignore[arg-type]
    params = {k: v for k, v in args.items() if k != "states"} | {"limit": 51}
    program = conn.execute(f"EXPLAIN {sql}", params).fetchall()
    roots = dict(conn.execute("SELECT rootpage, name FROM sqlite_master WHERE type = 'index'"))
    opened = {op[2]: roots.get(op[3]) for op in program if op[1] == "OpenRead"}
    seeks = [
        at
        for at, op in enumerate(program)
        if op[1] == "DeferredSeek" and str(opened[op[2]]).startswith("mcp_jobs_jobs_settled_")
    ]
    assert len(seeks) == 4, program  # one per settled state's arm
    for at in seeks:
        index_cursor = program[at][2]
        first_column = next(op for op in program[at + 1 :] if op[1] == "Column")
        assert first_column[2] == index_cursor, (opened[index_cursor], first_column)
    assert conn.execute(sql, params).fetchall() == []
