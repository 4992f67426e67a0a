"""The one schema install point (rule 10): numbered migrations, applied in order, each once.

`migrations/NNNN_name.sql` are the history; `schema.sql` is the declared current schema, and a
test checks that applying every migration from nothing yields exactly it. The runner executes
inside the executor's `BEGIN IMMEDIATE` transaction, so two processes migrating one file at once
serialize: the second finds every version recorded and applies nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources

from engine.drivers.sqlite.library import sqlite3

MIGRATIONS_TABLE = """
CREATE TABLE IF NOT EXISTS mcp_jobs_migrations (
    version    INTEGER PRIMARY KEY,
    name       TEXT NOT NULL,
    applied_at INTEGER NOT NULL
)
"""

_FILE = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")
_CREATES = re.compile(
    r"CREATE\s+(?:UNIQUE\s+)?(?:TABLE|INDEX|TRIGGER)\s+(?:IF NOT EXISTS\s+)?(\w+)\b"
)


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str


def migrations() -> list[Migration]:
    """Every migration shipped with this build, in version order."""
    folder = resources.files("engine.drivers.sqlite.migrations")
    found: list[Migration] = []
    for entry in folder.iterdir():
        match = _FILE.match(entry.name)
        if match is not None:
            found.append(Migration(int(match[1]), match[2], entry.read_text(encoding="utf-8")))
    found.sort(key=lambda m: m.version)
    return found


def declared_schema() -> str:
    return resources.files("engine.drivers.sqlite").joinpath("schema.sql").read_text("utf-8")


def declared_statement(name: str) -> str:
    """The statement in schema.sql that creates the table, index or trigger `name`."""
    for statement in statements(declared_schema()):
        match = _CREATES.match(statement)
        if match is not None and match[1] == name:
            return statement
    raise KeyError(name)


def statements(script: str) -> list[str]:
    """Split a script into statements. `executescript` would COMMIT the open transaction first,
    which is exactly the atomicity a migration needs, so each statement runs on its own."""
    found: list[str] = []
    current: list[str] = []
    for line in script.splitlines():
        if not current and (not line.strip() or line.lstrip().startswith("--")):
            continue
        current.append(line)
        text = "\n".join(current)
        if sqlite3.complete_statement(text):
            found.append(text.strip())
            current = []
    if current and "\n".join(current).strip():
        found.append("\n".join(current).strip())
    return found


def stored_version(conn: sqlite3.Connection) -> int:
    """The highest version recorded in the file (after `apply`: a newer build's may be there)."""
    (version,) = conn.execute(
        "SELECT coalesce(max(version), 0) FROM mcp_jobs_migrations"
    ).fetchone()
    return int(version)


def apply(conn: sqlite3.Connection, now_ms: int) -> list[int]:
    """Apply the migrations this file has not seen, inside the caller's write transaction.
    Returns the versions applied (empty when the file was up to date)."""
    conn.execute(MIGRATIONS_TABLE)
    done = {row[0] for row in conn.execute("SELECT version FROM mcp_jobs_migrations")}
    applied: list[int] = []
    for migration in migrations():
        if migration.version in done:
            continue
        for statement in statements(migration.sql):
            conn.execute(statement)
        conn.execute(
            "INSERT INTO mcp_jobs_migrations (version, name, applied_at) VALUES (?, ?, ?)",
            (migration.version, migration.name, now_ms),
        )
        applied.append(migration.version)
    return applied
