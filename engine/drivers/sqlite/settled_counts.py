"""Settled counts on SQLite (engine/settled_counts.py): one grouped read of the settled index
`(state, finished_at, id)`, a range of `finished_at` under each settled state."""

from __future__ import annotations

from engine.drivers.sqlite.library import sqlite3
from engine.drivers.sqlite.queries import SETTLED_PREDICATE
from engine.settled_counts import from_rows
from schemas.stats import SettledCount

# The partial index's own predicate, so the planner may use it.
COUNT = f"""
SELECT queue, state, count(*) FROM mcp_jobs_jobs
WHERE {SETTLED_PREDICATE}
  AND finished_at >= :since AND finished_at < :until
  AND (:tenant IS NULL OR tenant_id = :tenant)
GROUP BY queue, state
"""


def settled_counts(
    conn: sqlite3.Connection, since_ms: int, until_ms: int, tenant_id: str | None
) -> dict[str, SettledCount]:
    params = {"since": since_ms, "until": until_ms, "tenant": tenant_id}
    return from_rows(conn.execute(COUNT, params).fetchall())
