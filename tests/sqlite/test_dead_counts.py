"""The dead and failed counts (migration 5): triggers keep `mcp_jobs_dead_counts` equal to a
count of the jobs table through every way a row enters or leaves dead/failed, the migration
counts the rows that were there before it, and the stats read the counts instead of the dead
rows."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from engine import ManualClock
from engine.drivers.sqlite import SqliteDriver
from engine.drivers.sqlite import migrate as m
from engine.drivers.sqlite import queries as q
from engine.drivers.sqlite.library import sqlite3
from engine.drivers.sqlite.lifecycle import stats_params
from schemas.jobs import NackOptions
from tests.postgres.test_dead_counts import random_operations

Counts = dict[tuple[str, str, str], int]
# Every row: a count that reaches 0 is deleted, so the table holds only groups with failures.
COUNTS = "SELECT queue, tenant_id, state, n FROM mcp_jobs_dead_counts"
TRUTH = (
    "SELECT queue, coalesce(tenant_id, ''), state, count(*) FROM mcp_jobs_jobs"
    " WHERE state IN ('dead', 'failed') GROUP BY 1, 2, 3"
)
TRIGGERS = (
    "mcp_jobs_dead_counts_insert",
    "mcp_jobs_dead_counts_update",
    "mcp_jobs_dead_counts_delete",
)


def as_counts(rows: Any) -> Counts:
    return {(r[0], r[1], r[2]): int(r[3]) for r in rows}


@contextmanager
def reading(path: Path) -> Iterator[sqlite3.Connection]:
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        yield conn
    finally:
        conn.close()


async def test_the_counts_follow_every_operation(tmp_path: Path, clock: ManualClock) -> None:
    path = tmp_path / "jobs.db"
    driver = SqliteDriver(str(path), clock=clock)
    await driver.migrate()
    try:
        with reading(path) as conn:

            async def rows() -> Any:
                return conn.execute("SELECT id, state, tenant_id FROM mcp_jobs_jobs ORDER BY id")

            for seed in range(4):
                await random_operations(driver, clock, seed, 40, rows)
                truth = as_counts(conn.execute(TRUTH))
                assert as_counts(conn.execute(COUNTS)) == truth, seed
            assert {state for _, _, state in truth} == {"dead", "failed"}
            assert len({tenant for _, tenant, _ in truth}) == 3
            assert (
                conn.execute("SELECT count(*) FROM mcp_jobs_dead_counts WHERE n < 0").fetchone()[0]
                == 0
            )
            for tenant in (None, "t1"):
                got = {s.queue: [s.dead, s.failed] for s in await driver.stats(tenant_id=tenant)}
                expected: dict[str, list[int]] = {}
                for (queue, t, state), n in truth.items():
                    if tenant is None or t == tenant:
                        expected.setdefault(queue, [0, 0])[0 if state == "dead" else 1] += n
                assert {k: v for k, v in got.items() if v != [0, 0]} == expected
    finally:
        await driver.close()


async def test_the_migration_counts_the_rows_already_there(
    tmp_path: Path, clock: ManualClock
) -> None:
    """Back to version 4 (the objects migrations 5 and 14 make dropped), rows written, then
    migrated."""
    path = tmp_path / "jobs.db"
    driver = SqliteDriver(str(path), clock=clock)
    await driver.migrate()
    await driver.close()
    now = clock.now_ms()
    with reading(path) as conn:
        for trigger in TRIGGERS:
            conn.execute(f"DROP TRIGGER {trigger}")
        conn.execute("DROP TABLE mcp_jobs_dead_counts")
        conn.execute("DELETE FROM mcp_jobs_migrations WHERE version IN (5, 14)")
        conn.execute(
            """
            WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < 500)
            INSERT INTO mcp_jobs_jobs (id, run_id, name, queue, tenant_id, idempotency_key,
                input, state, max_attempts, run_at, queued_at, created_at, updated_at,
                finished_at)
            SELECT printf('%012d', n), 'r' || n, 'old', 'q' || (n % 3),
                   CASE WHEN n % 4 = 0 THEN NULL ELSE 't' || (n % 2) END, 'k' || n, '{}',
                   CASE n % 5 WHEN 0 THEN 'dead' WHEN 1 THEN 'failed' WHEN 2 THEN 'done'
                              WHEN 3 THEN 'ready' ELSE 'cancelled' END,
                   3, :now, :now, :now, :now, :now
              FROM g
            """,
            {"now": now},
        )
    driver = SqliteDriver(str(path), clock=clock)
    await driver.migrate()
    try:
        with reading(path) as conn:
            # Undoing migrations 5 and 14 stands for version 4 while no other touches their objects.
            later = [mig for mig in m.migrations() if mig.version > 5]
            assert [mig.version for mig in later if "dead_counts" in mig.sql] == [14]
            truth = as_counts(conn.execute(TRUTH))
            assert sum(truth.values()) == 200
            assert as_counts(conn.execute(COUNTS)) == truth
            (claimed,) = await driver.claim("w", 1, 60_000)
            await driver.nack(claimed.record.id, claimed.token, NackOptions(fail=True))
            assert as_counts(conn.execute(COUNTS)) == as_counts(conn.execute(TRUTH))
    finally:
        await driver.close()


async def test_both_install_roads_make_the_same_triggers(
    tmp_path: Path, clock: ManualClock
) -> None:
    driver = SqliteDriver(str(tmp_path / "migrated.db"), clock=clock)
    await driver.migrate()
    await driver.close()
    with reading(tmp_path / "declared.db") as declared:
        declared.execute(m.MIGRATIONS_TABLE)
        for statement in m.statements(m.declared_schema()):
            declared.execute(statement)
    found = []
    for name in ("migrated.db", "declared.db"):
        with reading(tmp_path / name) as conn:
            found.append(
                sorted(conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'trigger'"))
            )
    assert [name for name, _ in found[0]] == sorted(TRIGGERS)
    assert found[0] == found[1]
    assert all(re.search(r"\sWHEN\s", sql) for _, sql in found[0])


DEAD = 50_000


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


# Reading the dead rows from the settled index runs hundreds of thousands of VM instructions at
# this size; reading their counts, the few live rows and the recent window stays far under this.
MAX_KILO_STEPS = 20


async def test_the_stats_read_the_counts_not_the_dead_rows(
    tmp_path: Path, clock: ManualClock
) -> None:
    path = tmp_path / "jobs.db"
    driver = SqliteDriver(str(path), clock=clock)
    await driver.migrate()
    now = clock.now_ms()
    old = now - 30 * 86_400_000
    with reading(path) as conn:
        conn.execute(
            """
            WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < :count)
            INSERT INTO mcp_jobs_jobs (id, run_id, name, queue, tenant_id, idempotency_key,
                input, state, max_attempts, run_at, queued_at, created_at, updated_at,
                finished_at)
            SELECT printf('%012d', n), 'r' || n, 'old', 'default', 't' || (n % 2), 'k' || n,
                   '{}', CASE WHEN n % 2 = 0 THEN 'dead' ELSE 'failed' END,
                   3, :old, :old, :old, :old, :old + n
              FROM g
            """,
            {"count": DEAD, "old": old},
        )
        conn.execute("ANALYZE")
        for queues, tenant in ((None, None), (["default"], None), (None, "t0")):
            params = stats_params(now, queues, tenant)
            plan = [r[-1] for r in conn.execute(f"EXPLAIN QUERY PLAN {q.STATS}", params)]
            assert any("mcp_jobs_dead_counts" in p for p in plan), plan
            steps = _kilo_steps(conn, q.STATS, params)
            assert steps < MAX_KILO_STEPS, (queues, tenant, steps)
    try:
        (stats,) = await driver.stats()
        assert (stats.dead, stats.failed) == (DEAD // 2, DEAD // 2)
        (pinned,) = await driver.stats(tenant_id="t0")
        assert (pinned.dead, pinned.failed) == (DEAD // 2, 0)
    finally:
        await driver.close()


async def test_a_count_that_reaches_zero_is_deleted_and_the_migration_deletes_old_zeros(
    tmp_path: Path, clock: ManualClock
) -> None:
    """The stats read every row of the counts table, so a group whose failures were all retried
    or pruned must leave it; rows of 0 an earlier version kept go with migration 14."""
    path = tmp_path / "jobs.db"
    driver = SqliteDriver(str(path), clock=clock)
    await driver.migrate()
    await driver.close()
    with reading(path) as conn:
        conn.execute("DELETE FROM mcp_jobs_migrations WHERE version = 14")
        conn.executemany(
            "INSERT INTO mcp_jobs_dead_counts (queue, tenant_id, state, n) VALUES (?, ?, ?, 0)",
            [("q", f"t{n}", state) for n in range(50) for state in ("dead", "failed")],
        )
    driver = SqliteDriver(str(path), clock=clock)
    await driver.migrate()
    try:
        with reading(path) as conn:
            assert conn.execute("SELECT count(*) FROM mcp_jobs_dead_counts").fetchone() == (0,)
    finally:
        await driver.close()
