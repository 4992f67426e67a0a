"""Pruning settled history on PostgreSQL (engine.retention's rules), and named leader leases.

A `Cutoffs` travels as three parallel arrays (state, name, cutoff) plus the names with rules of
their own, so one batch is one statement (`prune_jobs` in queries.sql) however many job names
have a policy of their own. Events of no job past the audit retention go oldest first on their
partial index (migration 20).
"""

from __future__ import annotations

from collections.abc import Sequence

import asyncpg

from engine.drivers.postgres import rows
from engine.drivers.postgres.connections import Connections
from engine.retention import Cutoffs, PruneCount


def _args(cutoffs: Cutoffs, tenant_id: str | None) -> tuple[object, ...]:
    return (
        [r.state for r in cutoffs.rules],
        [r.name for r in cutoffs.rules],
        [r.cutoff for r in cutoffs.rules],
        list(cutoffs.named),
        tenant_id,
    )


def _counts(found: Sequence[asyncpg.Record]) -> list[PruneCount]:
    counted = [PruneCount(rows.job_state(r["state"]), r["queue"], int(r["n"])) for r in found]
    return sorted(counted)


async def prune_counts(
    db: Connections, cutoffs: Cutoffs, tenant_id: str | None
) -> list[PruneCount]:
    if not cutoffs.rules:
        return []
    args = _args(cutoffs, tenant_id)
    found = await db.idempotent(lambda c: c.fetch(db.q["prune_counts"], *args))
    return _counts(found)


async def prune(
    db: Connections, cutoffs: Cutoffs, limit: int, tenant_id: str | None
) -> list[PruneCount]:
    if not cutoffs.rules or limit <= 0:
        return []
    # Not repeated once it may have committed: a second run would delete a second batch (the
    # next call does that anyway). Run again when rolled back: it deleted nothing.
    args = (*_args(cutoffs, tenant_id), limit)
    found = await db.atomic(lambda c: c.fetch(db.q["prune_jobs"], *args))
    return _counts(found)


async def count_jobless_events(db: Connections, before: int) -> int:
    found = await db.idempotent(lambda c: c.fetchval(db.q["count_jobless_events"], before))
    return int(found)


async def forget_jobless_events(db: Connections, before: int, limit: int) -> int:
    if limit <= 0:
        return 0
    # Idempotent: run twice, it deletes events past their keep either way.
    q = db.q["forget_jobless_events"]
    status = await db.idempotent(lambda c: c.execute(q, before, limit))
    return int(status.split()[-1])


async def lead(db: Connections, name: str, holder: str, lease_ms: int, now: int) -> bool:
    # Idempotent for one holder: a second run finds its own lease and renews it.
    taken = await db.idempotent(lambda c: c.fetchval(db.q["lead"], name, holder, now, lease_ms))
    return taken is not None


async def lead_many(
    db: Connections, names: Sequence[str], holder: str, lease_ms: int, now: int
) -> set[str]:
    unique = sorted(set(names))
    rows = await db.idempotent(lambda c: c.fetch(db.q["lead_many"], unique, holder, now, lease_ms))
    return {row[0] for row in rows}
