"""Inbound events on PostgreSQL (engine/inbound_events.py): the events table and the waiters
index, in the driver's schema.

A send is one statement: the insert, the wake of every suspended job listed as waiting for its
(name, key, tenant), and a NOTIFY on the wake-up channel when any woke, so idle workers in every
process claim them now. The insert skips an id already stored, so a send run again through a
broken connection (`Connections.idempotent`) stores one event. The look encodes
`inbound_events.matches`; the kit (test_inbound_events.py) pins it to the memory driver.
"""

from __future__ import annotations

from functools import cache

import asyncpg

from engine.drivers.postgres.connections import Connections
from engine.drivers.postgres.rows import dump, load
from engine.drivers.postgres.sql import with_schema
from engine.inbound_events import EventCursor, InboundEvent

_SEND = """
WITH stored AS (
    INSERT INTO {schema}.inbound_events (id, name, key, tenant_id, payload, sent_at, expires_at)
    VALUES ($1, $2, $3, $4, $5::jsonb, $6, $7)
    ON CONFLICT (id) DO NOTHING
), woken AS (
    UPDATE {schema}.jobs SET run_at = least(run_at, $8), queued_at = least(queued_at, $8)
     WHERE state = 'suspended'
       AND id IN (SELECT job_id FROM {schema}.inbound_event_waiters
                   WHERE name = $2 AND key = $3 AND coalesce(tenant_id, '') = coalesce($4, ''))
    RETURNING id
)
SELECT count(*) AS woken,
       CASE WHEN count(*) > 0 THEN pg_notify($9::text, '') END AS notified
  FROM woken
"""
_FIRST = """
SELECT id, name, key, tenant_id, payload::text AS payload, sent_at, expires_at
  FROM {schema}.inbound_events
 WHERE name = $1 AND key = $2 AND coalesce(tenant_id, '') = coalesce($3, '')
   AND expires_at > $4
   AND ($5::bigint IS NULL OR (sent_at, id) > ($5::bigint, $6::text COLLATE "C"))
 ORDER BY sent_at, id
 LIMIT 1
"""
_AWAIT = """
INSERT INTO {schema}.inbound_event_waiters (job_id, name, key, tenant_id) VALUES ($1, $2, $3, $4)
ON CONFLICT (job_id) DO UPDATE SET name = excluded.name, key = excluded.key,
                                   tenant_id = excluded.tenant_id
"""
_FORGET = "DELETE FROM {schema}.inbound_event_waiters WHERE job_id = $1"
_WAKE_ONE = """
WITH woken AS (
    UPDATE {schema}.jobs SET run_at = least(run_at, $2), queued_at = least(queued_at, $2)
     WHERE id = $1 AND state = 'suspended'
    RETURNING id
)
SELECT count(*) AS woken, CASE WHEN count(*) > 0 THEN pg_notify($3::text, '') END AS notified
  FROM woken
"""
_PRUNE = """
WITH gone AS (
    DELETE FROM {schema}.inbound_events WHERE expires_at <= $1 RETURNING id
), orphans AS (
    DELETE FROM {schema}.inbound_event_waiters w
     WHERE NOT EXISTS (SELECT 1 FROM {schema}.jobs j
                        WHERE j.id = w.job_id
                          AND j.state IN ('ready', 'delayed', 'running', 'suspended'))
)
SELECT count(*) AS pruned FROM gone
"""


@cache
def _q(schema: str) -> dict[str, str]:
    texts = {
        "send": _SEND,
        "first": _FIRST,
        "await": _AWAIT,
        "forget": _FORGET,
        "wake_one": _WAKE_ONE,
        "prune": _PRUNE,
    }
    return {name: with_schema(text, schema) for name, text in texts.items()}


def _event(row: asyncpg.Record) -> InboundEvent:
    return InboundEvent(
        id=row["id"],
        name=row["name"],
        key=row["key"],
        tenant_id=row["tenant_id"],
        payload=load(row["payload"]),
        sent_at=row["sent_at"],
        expires_at=row["expires_at"],
    )


async def send(db: Connections, event: InboundEvent, now: int) -> int:
    q = _q(db.schema)["send"]
    args = (
        event.id,
        event.name,
        event.key,
        event.tenant_id,
        dump(event.payload),
        event.sent_at,
        event.expires_at,
        now,
        db.channel,
    )
    row = await db.idempotent(lambda c: c.fetchrow(q, *args))
    return int(row["woken"]) if row is not None else 0


async def first(
    db: Connections,
    name: str,
    key: str,
    tenant_id: str | None,
    started_at: int,
    after: EventCursor | None,
) -> InboundEvent | None:
    q = _q(db.schema)["first"]
    after_at, after_id = (None, None) if after is None else after
    row = await db.idempotent(
        lambda c: c.fetchrow(q, name, key, tenant_id, started_at, after_at, after_id)
    )
    return None if row is None else _event(row)


async def await_event(
    db: Connections, job_id: str, name: str, key: str, tenant_id: str | None
) -> None:
    q = _q(db.schema)["await"]
    await db.idempotent(lambda c: c.execute(q, job_id, name, key, tenant_id))


async def forget(db: Connections, job_id: str) -> None:
    q = _q(db.schema)["forget"]
    await db.idempotent(lambda c: c.execute(q, job_id))


async def wake_one(db: Connections, job_id: str, now: int) -> bool:
    q = _q(db.schema)["wake_one"]
    row = await db.idempotent(lambda c: c.fetchrow(q, job_id, now, db.channel))
    return row is not None and int(row["woken"]) > 0


async def prune(db: Connections, now: int) -> int:
    q = _q(db.schema)["prune"]
    row = await db.idempotent(lambda c: c.fetchrow(q, now))
    return int(row["pruned"]) if row is not None else 0
