"""The SQLite schema: one versioned install point (rule 10) and the dedupe rule's three places."""

from __future__ import annotations

import re
from pathlib import Path

from engine import ManualClock
from engine.drivers.sqlite import SqliteDriver
from engine.drivers.sqlite import migrate as m
from engine.drivers.sqlite import queries as q
from engine.drivers.sqlite.library import sqlite3
from schemas.states import LIVE_STATES

DURABLE_TABLES = {
    "mcp_jobs_jobs",
    "mcp_jobs_dead_counts",
    "mcp_jobs_steps",
    "mcp_jobs_events",
    "mcp_jobs_leases",
    "mcp_jobs_workers",
    "mcp_jobs_backfills",
    "mcp_jobs_outbox",
    "mcp_jobs_scheduler_state",
    "mcp_jobs_scheduler_leader",
    "mcp_jobs_leaders",
    "mcp_jobs_descriptors",
    "mcp_jobs_pauses",
    "mcp_jobs_rate_limits",  # engine/rate_limits.py
    "mcp_jobs_rate_reservations",
    "mcp_jobs_inbound_events",
    "mcp_jobs_inbound_event_waiters",
    "mcp_jobs_migrations",
}


def _squash(sql: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"--[^\n]*", "", sql)).strip()


def _shape(path: Path) -> dict[str, object]:
    """The structure of every table and index, independent of how the DDL text was written."""
    conn = sqlite3.connect(path)
    try:
        shape: dict[str, object] = {}
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            )
        ]
        for table in sorted(tables):
            indexes = {}
            for _seq, name, unique, origin, partial in conn.execute(f"PRAGMA index_list({table})"):
                (sql,) = conn.execute(
                    "SELECT coalesce(sql, '') FROM sqlite_master WHERE name = ?", (name,)
                ).fetchone()
                columns = list(conn.execute(f"PRAGMA index_xinfo({name})"))
                indexes[name] = (unique, origin, partial, columns, _squash(sql))
            shape[table] = {
                "columns": list(conn.execute(f"PRAGMA table_xinfo({table})")),
                "foreign_keys": list(conn.execute(f"PRAGMA foreign_key_list({table})")),
                "indexes": indexes,
            }
        return shape
    finally:
        conn.close()


async def test_migrating_from_nothing_yields_the_declared_schema(
    tmp_path: Path, clock: ManualClock
) -> None:
    driver = SqliteDriver(str(tmp_path / "migrated.db"), clock=clock)
    await driver.migrate()
    await driver.close()
    declared = sqlite3.connect(tmp_path / "declared.db", isolation_level=None)
    declared.execute(m.MIGRATIONS_TABLE)
    for statement in m.statements(m.declared_schema()):
        declared.execute(statement)
    declared.close()
    migrated = _shape(tmp_path / "migrated.db")
    assert set(migrated) == DURABLE_TABLES
    assert migrated == _shape(tmp_path / "declared.db")


async def test_migrate_twice_applies_each_version_once(tmp_path: Path, clock: ManualClock) -> None:
    path = tmp_path / "jobs.db"
    for _ in range(2):
        driver = SqliteDriver(str(path), clock=clock)
        await driver.migrate()
        await driver.migrate()
        await driver.close()
    conn = sqlite3.connect(path)
    versions = [r[0] for r in conn.execute("SELECT version FROM mcp_jobs_migrations")]
    conn.close()
    assert versions == [mig.version for mig in m.migrations()]
    assert versions and versions[0] == 1


async def test_index_conflict_target_and_live_lookup_spell_one_rule(
    tmp_path: Path, clock: ManualClock
) -> None:
    # Rule 2's three places. If the index drifted from the ON CONFLICT target, SQLite would
    # refuse the INSERT; if the lookup drifted, a dedupe could answer another namespace's row.
    driver = SqliteDriver(str(tmp_path / "jobs.db"), clock=clock)
    await driver.migrate()
    await driver.close()
    conn = sqlite3.connect(tmp_path / "jobs.db")
    (index_sql,) = conn.execute(
        "SELECT sql FROM sqlite_master WHERE name = 'mcp_jobs_jobs_live_key'"
    ).fetchone()
    assert f"({q.DEDUPE_KEY}) WHERE {q.LIVE_PREDICATE}" in _squash(index_sql)
    assert "UNIQUE" in index_sql
    assert f"ON CONFLICT ({q.DEDUPE_KEY}) WHERE {q.LIVE_PREDICATE} DO NOTHING" in _squash(
        q.INSERT_JOB
    )
    lookup = _squash(q.FIND_LIVE)
    assert "coalesce(tenant_id, '') = coalesce(:tenant_id, '')" in lookup
    assert lookup.endswith(f"AND {q.LIVE_PREDICATE}")
    assert tuple(re.findall(r"'(\w+)'", q.LIVE_PREDICATE)) == LIVE_STATES
    plan = conn.execute(
        f"EXPLAIN QUERY PLAN {q.FIND_LIVE}",
        {"name": "n", "tenant_id": None, "idempotency_key": "k"},
    ).fetchall()
    conn.close()
    assert any("mcp_jobs_jobs_live_key" in row[-1] for row in plan), plan


def test_statements_split_on_complete_statements_only() -> None:
    script = "-- a comment; not a statement\nCREATE TABLE t (a TEXT DEFAULT ';');\n\nSELECT 1;\n"
    assert m.statements(script) == ["CREATE TABLE t (a TEXT DEFAULT ';');", "SELECT 1;"]
