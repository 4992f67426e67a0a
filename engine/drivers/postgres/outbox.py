"""The transactional outbox over PostgreSQL: stage through the application's own transaction,
then a relay claims, publishes (enqueues) and stamps the rows.

A claim or a publish the server rolled back is run again (`Connections.atomic`); a stage is not,
since the transaction rolled back is the application's, which only the application can rerun."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import asyncpg

from engine.drivers.damage import readable
from engine.drivers.postgres import rows
from engine.drivers.postgres.connections import Connections
from engine.drivers.postgres.enqueue import Enqueuer
from engine.drivers.postgres.migrate import Conn
from engine.errors import OutboxNoTxError
from engine.ids import new_id
from schemas.jobs import EnqueueRequest, EnqueueResult
from schemas.outbox import OutboxRow


async def stage(
    db: Connections, tx: Any, requests: Sequence[EnqueueRequest], now: int
) -> list[str]:
    """Stage through the application's own connection `tx`, which must be inside a
    transaction: the jobs then exist exactly when the application's write commits."""
    # isinstance() also accepts a pool's connection proxy (asyncpg's metaclass says so).
    if not isinstance(tx, asyncpg.Connection) or not tx.is_in_transaction():
        raise OutboxNoTxError("postgres")
    ids = [new_id() for _ in requests]
    if not ids:
        return []
    async with db.guard():
        await tx.execute(db.q["outbox_stage"], now, ids, [r.to_json() for r in requests])
    return ids


async def claim(
    db: Connections, token: str, limit: int, lease_ms: int, now: int
) -> list[OutboxRow]:
    if limit <= 0:
        return []
    # A claim that may have committed is not sent again: its rows would sit claimed, unseen.
    found = await db.atomic(lambda c: c.fetch(db.q["outbox_claim"], now, limit, token, lease_ms))
    # A row another program wrote stays claimed and comes back at its lease's end, as a row that
    # failed to publish does; the others go on.
    claimed = readable(found, rows.outbox, lambda row: f"outbox row {row['id']!r}")
    claimed.sort(key=lambda r: (r.staged_at, r.id))
    return claimed


async def publish(
    db: Connections, enqueuer: Enqueuer, token: str, rows_: Sequence[OutboxRow], now: int
) -> list[EnqueueResult]:
    if not rows_:
        return []

    async def once(conn: Conn) -> tuple[list[EnqueueResult], bool]:
        async with conn.transaction():
            locked = await conn.fetch(db.q["outbox_owned"], [r.id for r in rows_], token)
            by_id = {row["id"]: rows.outbox(row) for row in locked}
            owned = [by_id[r.id] for r in rows_ if r.id in by_id]
            if not owned:
                return [], False
            # The enqueue and the stamp commit together, or neither does.
            results, inserted = await enqueuer.enqueue_on(conn, [r.request for r in owned])
            await conn.execute(
                db.q["outbox_mark_published"],
                now,
                [r.id for r in owned],
                [result.id for result in results],
            )
            return results, inserted

    results, inserted = await db.atomic(once)
    if inserted:
        enqueuer.signal.notify()
    return results


async def release(db: Connections, token: str, ids: Sequence[str]) -> None:
    if not ids:
        return
    await db.idempotent(lambda c: c.execute(db.q["outbox_release"], list(ids), token))


async def forget_published(db: Connections, published_before: int, limit: int) -> int:
    # Idempotent: run twice, it deletes rows past their keep either way.
    q = db.q["outbox_forget_published"]
    status = await db.idempotent(lambda c: c.execute(q, published_before, limit))
    return int(status.split()[-1])
