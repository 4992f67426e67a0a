"""Rate limits on SQLite (engine/rate_limits.py): one row per key, its GCRA TAT in epoch µs.

`take` runs inside the executor's write transaction, which holds the file's write lock from
the read to the write: two processes taking under one key are serialised by SQLite itself, so
the arithmetic can be `rate_limits.take_all`'s own, all or nothing across the keys.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from engine.rate_limits import RateState, RateTake, RateVerdict, take_all

TABLE = "mcp_jobs_rate_limits"
COLUMNS = "key, tat, rate_limit, per_ms, burst"
UPSERT = """
INSERT INTO mcp_jobs_rate_limits (key, tat, rate_limit, per_ms, burst, updated_at)
VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT (key) DO UPDATE SET tat = excluded.tat, rate_limit = excluded.rate_limit,
    per_ms = excluded.per_ms, burst = excluded.burst, updated_at = excluded.updated_at
"""


def take(conn: sqlite3.Connection, takes: Sequence[RateTake], now: int) -> RateVerdict:
    keys = [t.key for t in takes]
    marks = ", ".join("?" * len(keys))
    tats: dict[str, int] = dict(
        conn.execute(f"SELECT key, tat FROM mcp_jobs_rate_limits WHERE key IN ({marks})", keys)
    )
    verdict, new = take_all(tats, takes, now)
    conn.executemany(
        UPSERT, [(t.key, new[t.key], t.limit, t.per_ms, t.burst, now) for t in takes if new]
    )
    return verdict


def states(conn: sqlite3.Connection, limit: int) -> list[RateState]:
    rows = conn.execute(
        f"SELECT {COLUMNS} FROM mcp_jobs_rate_limits ORDER BY key LIMIT ?", (limit,)
    )
    return [RateState(*row) for row in rows]
