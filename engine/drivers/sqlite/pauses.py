"""Pauses on SQLite (engine/pauses.py): one row per paused queue or job name.

Each function runs inside the executor's one transaction. The claim (queries.CLAIM) excludes
held jobs by probing this table's primary key, so a pause holds from the next claim after it
commits, on every connection to the file.
"""

from __future__ import annotations

from engine.drivers.damage import pause_as_stored, readable
from engine.drivers.sqlite.library import sqlite3
from schemas.pauses import Pause, PauseKind

INSERT = """
INSERT INTO mcp_jobs_pauses (kind, name, paused_by, paused_at, reason) VALUES (?, ?, ?, ?, ?)
ON CONFLICT (kind, name) DO NOTHING
"""
COLUMNS = "kind, name, paused_by, paused_at, reason"
ONE = f"SELECT {COLUMNS} FROM mcp_jobs_pauses WHERE kind = ? AND name = ?"
ALL = f"SELECT {COLUMNS} FROM mcp_jobs_pauses ORDER BY kind, name"
DELETE = "DELETE FROM mcp_jobs_pauses WHERE kind = ? AND name = ?"


def _pause(row: tuple[object, ...]) -> Pause:
    kind, name, paused_by, paused_at, reason = row
    details = {"paused_by": paused_by, "paused_at": paused_at, "reason": reason}
    return pause_as_stored(kind, name, lambda: details)


def pause(
    conn: sqlite3.Connection,
    kind: PauseKind,
    name: str,
    actor: str | None,
    reason: str | None,
    now: int,
) -> tuple[Pause, bool]:
    inserted = conn.execute(INSERT, (kind, name, actor, now, reason)).rowcount == 1
    return _pause(conn.execute(ONE, (kind, name)).fetchone()), not inserted


def resume(conn: sqlite3.Connection, kind: PauseKind, name: str) -> Pause | None:
    row = conn.execute(ONE, (kind, name)).fetchone()
    if row is None:
        return None
    conn.execute(DELETE, (kind, name))
    return _pause(row)


def pauses(conn: sqlite3.Connection) -> list[Pause]:
    return readable(conn.execute(ALL), _pause, lambda row: f"pause row {row[:2]!r}")
