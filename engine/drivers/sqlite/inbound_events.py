"""Inbound events on SQLite (engine/inbound_events.py): the events table and the waiters index.

Each function runs inside the executor's one transaction: a send stores the event and wakes the
waiting jobs in one commit, so a job that parked before it is never missed. The look encodes
`inbound_events.matches`; the kit (test_inbound_events.py) pins it to the memory driver.
"""

from __future__ import annotations

from typing import Any

from engine.drivers.damage import UNDECODABLE, UndecodableRow
from engine.drivers.sqlite.codec import dumps, loads
from engine.drivers.sqlite.library import sqlite3
from engine.drivers.sqlite.queries import LIVE_PREDICATE
from engine.inbound_events import EventCursor, InboundEvent

INSERT = """
INSERT INTO mcp_jobs_inbound_events (id, name, key, tenant_id, payload, sent_at, expires_at)
VALUES (?, ?, ?, ?, ?, ?, ?)
"""
# Every suspended job listed as waiting for (name, key, tenant) is due now.
WAKE_WAITING = """
UPDATE mcp_jobs_jobs SET run_at = min(run_at, :now), queued_at = min(queued_at, :now)
 WHERE state = 'suspended'
   AND id IN (SELECT job_id FROM mcp_jobs_inbound_event_waiters
               WHERE name = :name AND key = :key AND coalesce(tenant_id, '') = :tenant)
"""
FIRST = """
SELECT id, name, key, tenant_id, payload, sent_at, expires_at FROM mcp_jobs_inbound_events
 WHERE name = :name AND key = :key AND coalesce(tenant_id, '') = :tenant
   AND expires_at > :started
   AND (:after_at IS NULL OR sent_at > :after_at OR (sent_at = :after_at AND id > :after_id))
 ORDER BY sent_at, id
 LIMIT 1
"""
AWAIT = """
INSERT INTO mcp_jobs_inbound_event_waiters (job_id, name, key, tenant_id) VALUES (?, ?, ?, ?)
ON CONFLICT (job_id) DO UPDATE SET name = excluded.name, key = excluded.key,
                                   tenant_id = excluded.tenant_id
"""
FORGET = "DELETE FROM mcp_jobs_inbound_event_waiters WHERE job_id = ?"
WAKE_ONE = """
UPDATE mcp_jobs_jobs SET run_at = min(run_at, ?1), queued_at = min(queued_at, ?1)
 WHERE id = ?2 AND state = 'suspended'
"""
PRUNE = "DELETE FROM mcp_jobs_inbound_events WHERE expires_at <= ?"
PRUNE_WAITERS = f"""
DELETE FROM mcp_jobs_inbound_event_waiters
 WHERE job_id NOT IN (SELECT id FROM mcp_jobs_jobs WHERE {LIVE_PREDICATE})
"""


def _event(row: tuple[Any, ...]) -> InboundEvent:
    event_id, name, key, tenant_id, payload, sent_at, expires_at = row
    try:
        payload = loads(payload)
    except UNDECODABLE as exc:
        # The event is this waiter's by its columns: failing the wait names it, where passing it
        # over would leave the job waiting for an event that came.
        raise UndecodableRow("", exc, "inbound", str(event_id)) from exc
    return InboundEvent(
        id=event_id,
        name=name,
        key=key,
        tenant_id=tenant_id,
        payload=payload,
        sent_at=sent_at,
        expires_at=expires_at,
    )


def send(conn: sqlite3.Connection, event: InboundEvent, now: int) -> int:
    conn.execute(
        INSERT,
        (
            event.id,
            event.name,
            event.key,
            event.tenant_id,
            dumps(event.payload),
            event.sent_at,
            event.expires_at,
        ),
    )
    target = {"now": now, "name": event.name, "key": event.key, "tenant": event.tenant_id or ""}
    return conn.execute(WAKE_WAITING, target).rowcount


def first(
    conn: sqlite3.Connection,
    name: str,
    key: str,
    tenant_id: str | None,
    started_at: int,
    after: EventCursor | None,
) -> InboundEvent | None:
    row = conn.execute(
        FIRST,
        {
            "name": name,
            "key": key,
            "tenant": tenant_id or "",
            "started": started_at,
            "after_at": None if after is None else after[0],
            "after_id": None if after is None else after[1],
        },
    ).fetchone()
    return None if row is None else _event(row)


def await_event(
    conn: sqlite3.Connection, job_id: str, name: str, key: str, tenant_id: str | None
) -> None:
    conn.execute(AWAIT, (job_id, name, key, tenant_id))


def forget(conn: sqlite3.Connection, job_id: str) -> None:
    conn.execute(FORGET, (job_id,))


def wake_one(conn: sqlite3.Connection, job_id: str, now: int) -> bool:
    return conn.execute(WAKE_ONE, (now, job_id)).rowcount == 1


def prune(conn: sqlite3.Connection, now: int) -> int:
    gone = conn.execute(PRUNE, (now,)).rowcount
    conn.execute(PRUNE_WAITERS)
    return gone
