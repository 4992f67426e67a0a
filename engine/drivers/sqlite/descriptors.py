"""Published job descriptors on SQLite (engine/descriptors.py): one row per job name.

Each function runs inside the executor's one transaction, so a publish of many names is one
atomic upsert and the last writer wins per name.
"""

from __future__ import annotations

from collections.abc import Sequence

from engine.descriptors import decode, encode, forgettable, stamped
from engine.drivers.sqlite.library import sqlite3
from schemas.descriptor import JobDescriptor

PUBLISH = """
INSERT INTO mcp_jobs_descriptors (name, version, published_by, published_at, descriptor)
VALUES (?, ?, ?, ?, ?)
ON CONFLICT (name) DO UPDATE SET
    version = excluded.version,
    published_by = excluded.published_by,
    published_at = excluded.published_at,
    descriptor = excluded.descriptor
"""
ALL = "SELECT name, descriptor FROM mcp_jobs_descriptors ORDER BY name"
ONE = "SELECT name, descriptor FROM mcp_jobs_descriptors WHERE name = ?"
FORGET = "DELETE FROM mcp_jobs_descriptors WHERE published_at < ?"
FORGET_ONE = "DELETE FROM mcp_jobs_descriptors WHERE name = ?"
STORED = "SELECT name, descriptor, published_at FROM mcp_jobs_descriptors"


def publish(
    conn: sqlite3.Connection, worker_id: str, descriptors: Sequence[JobDescriptor], now: int
) -> None:
    rows = []
    for descriptor in descriptors:
        kept = stamped(descriptor, worker_id, now)
        rows.append((kept.name, kept.version or "", worker_id, now, encode(kept)))
    conn.executemany(PUBLISH, rows)


def published(conn: sqlite3.Connection, name: str | None) -> list[JobDescriptor]:
    found = conn.execute(ALL) if name is None else conn.execute(ONE, (name,))
    return [decode(row_name, text) for row_name, text in found]


def forget(conn: sqlite3.Connection, published_before: int) -> int:
    gone = conn.execute(FORGET, (published_before,)).rowcount
    # The rest, read whole (a row per job name): one another program wrote goes too.
    doomed = [
        (name,)
        for name, text, at in conn.execute(STORED)
        if not isinstance(at, int) or forgettable(name, text, published_before)
    ]
    return gone + conn.executemany(FORGET_ONE, doomed).rowcount
