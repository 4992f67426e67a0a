"""Rate limits on SQLite (engine/rate_limits.py): one row per key, its GCRA TAT in epoch µs.

`take` runs inside the executor's write transaction, which holds the file's write lock from
the read to the write: two processes taking under one key are serialised by SQLite itself, so
the arithmetic can be `rate_limits.take_all`'s own, all or nothing across the keys, and a
reservation (`mcp_jobs_rate_reservations`) is written in that same transaction.
"""

from __future__ import annotations

from collections.abc import Sequence

from engine.drivers.damage import or_none, readable
from engine.drivers.sqlite.library import sqlite3
from engine.drivers.sqlite.queries import is_number
from engine.rate_limits import (
    ADOPT_AFTER_MS,
    RateReservation,
    RateState,
    RateTake,
    RateVerdict,
    keys_of,
    late_window_ms,
    prefix_end,
    stored_reservation,
    stored_state,
    stored_tat,
    take_all,
    use_reservation,
)

TABLE = "mcp_jobs_rate_limits"
COLUMNS = "key, tat, rate_limit, per_ms, burst"
UPSERT = """
INSERT INTO mcp_jobs_rate_limits (key, tat, rate_limit, per_ms, burst, updated_at)
VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT (key) DO UPDATE SET tat = excluded.tat, rate_limit = excluded.rate_limit,
    per_ms = excluded.per_ms, burst = excluded.burst, updated_at = excluded.updated_at
"""


RESERVATIONS = "job_id, slot_at, late_at, blocked_key, keys"


def take(
    conn: sqlite3.Connection,
    takes: Sequence[RateTake],
    now: int,
    job_id: str | None,
    up_to: int = 1,
) -> RateVerdict:
    conn.execute("DELETE FROM mcp_jobs_rate_reservations WHERE late_at < ?", (now,))
    if job_id is not None:
        row = conn.execute(
            f"SELECT {RESERVATIONS} FROM mcp_jobs_rate_reservations WHERE job_id = ?", (job_id,)
        ).fetchone()
        held = use_reservation(None if row is None else _reservation(row), now)
        if held is not None:
            if held.blocked_key is None:
                conn.execute("DELETE FROM mcp_jobs_rate_reservations WHERE job_id = ?", (job_id,))
            return held
        conn.execute("DELETE FROM mcp_jobs_rate_reservations WHERE job_id = ?", (job_id,))
        # An overdue slot over the same keys (`adoptable`): start on it.
        adopted = conn.execute(
            "SELECT job_id FROM mcp_jobs_rate_reservations WHERE keys = ? AND slot_at <= ?"
            " AND late_at >= ? ORDER BY slot_at LIMIT 1",
            (keys_of(takes), now - ADOPT_AFTER_MS, now),
        ).fetchone()
        if adopted is not None:
            conn.execute("DELETE FROM mcp_jobs_rate_reservations WHERE job_id = ?", adopted)
            return RateVerdict(None, now)
    keys = [t.key for t in takes]
    marks = ", ".join("?" * len(keys))
    # A TAT another program wrote is none: the key takes as a fresh one and is written anew.
    stored = conn.execute(f"SELECT key, tat FROM mcp_jobs_rate_limits WHERE key IN ({marks})", keys)
    tats = dict(readable(stored, lambda row: (row[0], stored_tat(row[1])), _named))
    verdict, new = take_all(tats, takes, now, reserve=job_id is not None, up_to=up_to)
    if job_id is not None and verdict.blocked_key is not None:
        slot = verdict.next_start_at
        conn.execute(
            f"INSERT OR REPLACE INTO mcp_jobs_rate_reservations ({RESERVATIONS}, reserved_at)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (job_id, slot, slot + late_window_ms(takes), verdict.blocked_key, keys_of(takes), now),
        )
    conn.executemany(
        UPSERT, [(t.key, new[t.key], t.limit, t.per_ms, t.burst, now) for t in takes if new]
    )
    return verdict


def states(conn: sqlite3.Connection, limit: int, prefix: str) -> list[RateState]:
    end = prefix_end(prefix)
    below = "" if end is None else " AND key < :end"
    rows = conn.execute(
        f"SELECT {COLUMNS} FROM mcp_jobs_rate_limits WHERE key >= :prefix{below}"
        " ORDER BY key LIMIT :limit",
        {"prefix": prefix, "end": end, "limit": limit},
    )
    return readable(rows, stored_state, _named)


def forget_idle(conn: sqlite3.Connection, tat_before: int, limit: int) -> int:
    # A TAT that is no number (another program's) is forgotten too: no take can read it.
    return conn.execute(
        "DELETE FROM mcp_jobs_rate_limits WHERE key IN (SELECT key FROM mcp_jobs_rate_limits"
        f" WHERE tat < :before OR NOT {is_number('tat')} LIMIT :limit)",
        {"before": tat_before, "limit": limit},
    ).rowcount


def reservations(conn: sqlite3.Connection, limit: int) -> list[RateReservation]:
    rows = conn.execute(
        f"SELECT {RESERVATIONS} FROM mcp_jobs_rate_reservations ORDER BY slot_at, job_id LIMIT ?",
        (limit,),
    )
    return readable(rows, stored_reservation, _reservation_named)


def _reservation(row: tuple[object, ...]) -> RateReservation | None:
    # Another program's row is none: the job takes afresh, and the take deletes the row.
    return or_none(lambda: stored_reservation(row), _reservation_named(row))


def _named(row: tuple[object, ...]) -> str:
    return f"rate key {row[0]!r}"


def _reservation_named(row: tuple[object, ...]) -> str:
    return f"the rate reservation of job {row[0]!r}"
