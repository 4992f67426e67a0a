"""A SQLite file as an earlier build left it: every migration before `version` applied and
stamped, for a test of what a later migration does to the rows that build wrote."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from engine.drivers.sqlite import migrate as m
from engine.drivers.sqlite.library import sqlite3


def migrated_before(path: Path, version: int, applied_at: int = 0) -> Any:
    """An open autocommit connection to `path`, its schema at `version` - 1."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute(m.MIGRATIONS_TABLE)
    for migration in m.migrations():
        if migration.version >= version:
            break
        for statement in m.statements(migration.sql):
            conn.execute(statement)
        conn.execute(
            "INSERT INTO mcp_jobs_migrations (version, name, applied_at) VALUES (?, ?, ?)",
            (migration.version, migration.name, applied_at),
        )
    return conn
