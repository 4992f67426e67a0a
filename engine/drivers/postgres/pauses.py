"""Pauses on PostgreSQL (engine/pauses.py): one row per paused queue or job name.

The claim (queries.sql `claim`, `claim_queues`) probes this table's primary key for each row it
walks, so a pause holds from the first claim that starts after it commits, in every process:
no cache, so no window in which a worker still claims paused work. Both writes are safe to run
again through a broken connection (`Connections.idempotent`): the state they leave is the same;
only the answer of a second run may say the pause was already there (or already gone).
"""

from __future__ import annotations

from typing import cast

import asyncpg

from engine.drivers.postgres.connections import Connections
from schemas.pauses import Pause, PauseKind


def _pause(row: asyncpg.Record) -> Pause:
    return Pause(
        kind=cast(PauseKind, row["kind"]),
        name=row["name"],
        paused_by=row["paused_by"],
        paused_at=row["paused_at"],
        reason=row["reason"],
    )


async def pause(
    db: Connections, kind: PauseKind, name: str, actor: str | None, reason: str | None, now: int
) -> tuple[Pause, bool]:
    q = db.q["pause"]
    while True:
        found = await db.idempotent(lambda c: c.fetch(q, kind, name, actor, now, reason))
        if found:
            return _pause(found[0]), not found[0]["inserted"]
        # A concurrent resume deleted the row this statement's snapshot could not insert over:
        # try again, which either inserts or reads the pause now in force.


async def resume(db: Connections, kind: PauseKind, name: str) -> Pause | None:
    q = db.q["resume"]
    found = await db.idempotent(lambda c: c.fetch(q, kind, name, db.channel))
    return _pause(found[0]) if found else None


async def pauses(db: Connections) -> list[Pause]:
    q = db.q["pauses"]
    return [_pause(row) for row in await db.idempotent(lambda c: c.fetch(q))]
