"""Pruning settled history on SQLite (engine.retention's rules), and named leadership leases.

Each rule of a `Cutoffs` is one range of the settled index `(state, finished_at, id)`: the
statement spells the index's predicate literally, since SQLite uses a partial index only for a
WHERE clause that contains it. A prune reads each rule's oldest rows, keeps the `limit` oldest of
all of them, and deletes those jobs with their steps, events and slots, all in the executor's
one write transaction: no other writer runs in between, so no row is taken twice. Events of no
job past the audit retention go oldest first on their partial index (0016).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from engine.drivers.sqlite.codec import job_state
from engine.drivers.sqlite.library import sqlite3
from engine.drivers.sqlite.queries import SETTLED_PREDICATE, lease_over
from engine.retention import Cutoffs, PruneCount, PruneRule
from schemas.states import JobState

_WHERE = f"""
 WHERE {SETTLED_PREDICATE}
   AND state = :state AND finished_at < :cutoff
   AND (:tenant IS NULL OR tenant_id = :tenant)
   AND CASE WHEN :name IS NULL
            THEN name NOT IN (SELECT value FROM json_each(:named))
            ELSE name = :name END"""

EXPIRED = f"""
SELECT id, state, queue, finished_at FROM mcp_jobs_jobs {_WHERE}
 ORDER BY finished_at, id
 LIMIT :limit"""

COUNT_EXPIRED = f"SELECT state, queue, count(*) FROM mcp_jobs_jobs {_WHERE} GROUP BY state, queue"

DELETE_JOB = f"DELETE FROM mcp_jobs_jobs WHERE id = ? AND {SETTLED_PREDICATE}"
DELETE_STEPS = "DELETE FROM mcp_jobs_steps WHERE job_id = ?"
DELETE_EVENTS = "DELETE FROM mcp_jobs_events WHERE job_id = ?"
DELETE_SLOTS = "DELETE FROM mcp_jobs_leases WHERE job_id = ?"

TAKE_LEAD = f"""
INSERT INTO mcp_jobs_leaders (name, holder, expires_at) VALUES (:name, :holder, :expires)
ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
WHERE mcp_jobs_leaders.holder = excluded.holder OR {lease_over("mcp_jobs_leaders.expires_at")}
RETURNING holder
"""


def _params(rule: PruneRule, cutoffs: Cutoffs, tenant_id: str | None) -> dict[str, object]:
    return {
        "state": rule.state,
        "cutoff": rule.cutoff,
        "tenant": tenant_id,
        "name": rule.name,
        "named": json.dumps(list(cutoffs.named)),
    }


def prune_counts(
    conn: sqlite3.Connection, cutoffs: Cutoffs, tenant_id: str | None
) -> list[PruneCount]:
    counts: dict[tuple[JobState, str], int] = {}
    for rule in cutoffs.rules:
        for state, queue, n in conn.execute(COUNT_EXPIRED, _params(rule, cutoffs, tenant_id)):
            key = (job_state(state), queue)
            counts[key] = counts.get(key, 0) + n
    return [PruneCount(s, q, n) for (s, q), n in sorted(counts.items())]


def prune(
    conn: sqlite3.Connection, cutoffs: Cutoffs, limit: int, tenant_id: str | None
) -> list[PruneCount]:
    if limit <= 0:
        return []
    found: list[tuple[int, str, JobState, str]] = []
    for rule in cutoffs.rules:
        params = {**_params(rule, cutoffs, tenant_id), "limit": limit}
        for job_id, state, queue, finished_at in conn.execute(EXPIRED, params):
            found.append((finished_at, job_id, job_state(state), queue))
    found.sort()
    doomed = found[:limit]
    ids = [(job_id,) for _, job_id, _, _ in doomed]
    for statement in (DELETE_STEPS, DELETE_EVENTS, DELETE_SLOTS, DELETE_JOB):
        conn.executemany(statement, ids)
    counts: dict[tuple[JobState, str], int] = {}
    for _, _, state, queue in doomed:
        counts[(state, queue)] = counts.get((state, queue), 0) + 1
    return [PruneCount(s, q, n) for (s, q), n in sorted(counts.items())]


def lead(conn: sqlite3.Connection, name: str, holder: str, lease_ms: int, now: int) -> bool:
    params = {"name": name, "holder": holder, "expires": now + lease_ms, "now": now}
    return bool(conn.execute(TAKE_LEAD, params).fetchall())


def lead_many(
    conn: sqlite3.Connection, names: Sequence[str], holder: str, lease_ms: int, now: int
) -> set[str]:
    return {name for name in sorted(set(names)) if lead(conn, name, holder, lease_ms, now)}


# Events of no job recorded before :before, oldest first on mcp_jobs_events_jobless (the WHERE
# spells the index's predicate, which SQLite needs to use a partial index).
JOBLESS_EVENTS = """
SELECT seq FROM mcp_jobs_events INDEXED BY mcp_jobs_events_jobless
WHERE job_id IS NULL AND at < :before ORDER BY at, seq LIMIT :limit
"""
COUNT_JOBLESS_EVENTS = """
SELECT count(*) FROM mcp_jobs_events INDEXED BY mcp_jobs_events_jobless
WHERE job_id IS NULL AND at < :before
"""
FORGET_JOBLESS_EVENTS = f"DELETE FROM mcp_jobs_events WHERE seq IN ({JOBLESS_EVENTS})"


def count_jobless_events(conn: sqlite3.Connection, before: int) -> int:
    row = conn.execute(COUNT_JOBLESS_EVENTS, {"before": before}).fetchone()
    return int(row[0])


def forget_jobless_events(conn: sqlite3.Connection, before: int, limit: int) -> int:
    return conn.execute(FORGET_JOBLESS_EVENTS, {"before": before, "limit": limit}).rowcount
