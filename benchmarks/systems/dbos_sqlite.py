"""DBOS Transact on a SQLite system database: the PostgreSQL adapter with a `sqlite:///` URL.

DBOS takes a SQLite file as its system database through `system_database_url` (its documented
default for development). Everything else is `DbosTransact`'s: queued workflows, the queue at
`worker_concurrency=16, polling_interval_sec=0.01`. DBOS opens the file in SQLite's default
rollback journal; every connection here is switched to WAL with `synchronous=NORMAL`, which is
what mcp-jobs' SQLite driver runs on, so both commit with the same durability (and DBOS's
readers do not block its writers).
"""

from __future__ import annotations

import asyncio
import sqlite3
from typing import Any

import sqlalchemy as sa

from benchmarks.systems.base import Kind
from benchmarks.systems.dbos_transact import DbosTransact

PRAGMAS = ("PRAGMA journal_mode = WAL", "PRAGMA synchronous = NORMAL")


def _pragmas(dbapi_conn: Any, _record: Any) -> None:
    # Listens on every Engine of this process; only SQLite connections are DBOS's file here.
    if isinstance(dbapi_conn, sqlite3.Connection):
        for pragma in PRAGMAS:
            dbapi_conn.execute(pragma)


# DBOS builds its engine inside launch(); a class-level listener reaches it without
# replacing DBOS's own connect hook (IMMEDIATE transactions, busy timeout, foreign keys).
sa.event.listen(sa.engine.Engine, "connect", _pragmas)


def sqlite_path(url: str) -> str:
    prefix = "sqlite:///"
    if not url.startswith(prefix):
        raise ValueError(f"not a sqlite:/// URL: {url!r}")
    return url[len(prefix) :]


def _unfinished(path: str, kind: str) -> int:
    conn = sqlite3.connect(path)
    try:
        row = conn.execute(
            "SELECT count(*) FROM workflow_status WHERE name LIKE ? AND status <> 'SUCCESS'",
            (f"%bench_{kind}",),
        ).fetchone()
    finally:
        conn.close()
    return int(row[0])


class DbosSqlite(DbosTransact):
    def settings(self, concurrency: int) -> dict[str, Any]:
        return {
            **super().settings(concurrency),
            "system database": "SQLite file (sqlite:///…), " + ", ".join(PRAGMAS),
        }

    async def unfinished(self, url: str, kind: Kind) -> int:
        return await asyncio.to_thread(_unfinished, sqlite_path(url), kind)
