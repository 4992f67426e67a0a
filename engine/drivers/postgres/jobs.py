"""Job-level operations over PostgreSQL, one function each: hand back (nack), read, cancel,
retry, record an event. Claiming is in claims.py, enqueue in enqueue.py, the settle writes in
batch.py.

Each mirrors the memory driver's semantics exactly (the parity suite compares them): a
transition computed in Python comes from engine.rules, one computed in SQL (queries.sql) is
pinned to engine.rules by tests/postgres/test_rules_agree.py. The happy path writes no events.
"""

from __future__ import annotations

from collections.abc import Sequence

import asyncpg

from engine import rules
from engine.drivers.postgres import rows
from engine.drivers.postgres.connections import Connections
from engine.drivers.postgres.migrate import Conn
from engine.errors import (
    JobDuplicateError,
    JobNotCancellableError,
    JobNotFoundError,
    JobNotRetryableError,
    JobSlotLostError,
)
from schemas.events import EventRecord
from schemas.jobs import JobFilter, JobPage, JobRecord, NackOptions
from schemas.stats import QueueStats
from schemas.steps import StepRecord


async def nack(
    db: Connections, job_id: str, token: str, options: NackOptions, now: int
) -> JobRecord:
    """Hand a claimed job back. The next state, run_at and event come from `rules`; the
    attempt and queued_at, which need the held row, are computed in the statement."""
    outcome = rules.nack_transition(options, now, 0, 0)
    error = options.error.model_dump_json() if options.error is not None else None

    async def once(first: bool) -> JobRecord:
        async with db.conn() as conn:
            row = await conn.fetchrow(
                db.q["nack"],
                job_id,
                token,
                outcome.state,
                options.counts_as_attempt,
                outcome.run_at,
                outcome.keeps_queued_at,
                error,
                outcome.finished_at,
                now,
                outcome.event,
            )
            if row is None and not first:
                row = await conn.fetchrow(db.q["settled_by"], job_id, token)
        if row is None:
            raise JobSlotLostError(job_id)
        return rows.job(row)

    return await db.retry.resilient(once)


async def get(db: Connections, job_id: str, tenant_id: str | None = None) -> JobRecord:
    q = db.q["get"]
    row = await db.idempotent(lambda c: c.fetchrow(q, job_id, tenant_id))
    if row is None:
        raise JobNotFoundError(job_id, tenant_id)
    return rows.job(row)


async def list_jobs(db: Connections, filter: JobFilter) -> JobPage:
    args = (
        list(filter.states) if filter.states is not None else None,
        filter.name,
        filter.queue,
        filter.tenant_id,
        filter.cursor,
        filter.limit + 1,
    )
    found = await db.idempotent(lambda c: c.fetch(db.q["list_jobs"], *args))
    page = [rows.job(row) for row in found[: filter.limit]]
    more = len(found) > filter.limit
    return JobPage(jobs=page, next_cursor=page[-1].id if more and page else None)


async def load_trace(
    db: Connections, job_id: str, tenant_id: str | None = None
) -> tuple[JobRecord, list[StepRecord], list[EventRecord]]:
    async def read(conn: Conn) -> tuple[JobRecord, list[asyncpg.Record], list[asyncpg.Record]]:
        row = await conn.fetchrow(db.q["get"], job_id, tenant_id)
        if row is None:
            raise JobNotFoundError(job_id, tenant_id)
        record = rows.job(row)
        steps = await conn.fetch(db.q["trace_steps"], record.run_id)
        events = await conn.fetch(db.q["trace_events"], job_id)
        return record, steps, events

    record, steps, events = await db.idempotent(read)
    return record, [rows.step(s) for s in steps], [rows.event(e) for e in events]


async def stats(
    db: Connections, now: int, queues: Sequence[str] | None = None, tenant_id: str | None = None
) -> list[QueueStats]:
    args = (now, list(queues) if queues is not None else None, tenant_id)
    found = await db.idempotent(lambda c: c.fetch(db.q["stats"], *args))
    # Sorted here, not in SQL: Python's code-point order, whatever the database collation.
    return sorted((rows.queue_stats(row) for row in found), key=lambda s: s.queue)


async def cancel(
    db: Connections, job_id: str, tenant_id: str | None, actor: str | None, now: int
) -> JobRecord:
    async with db.conn() as conn:
        row = await conn.fetchrow(db.q["cancel"], job_id, tenant_id, now, actor)
    if row is None:
        raise JobNotFoundError(job_id, tenant_id)
    if row["id"] is None:
        raise JobNotCancellableError(job_id, rows.job_state(row["previous_state"]))
    return rows.job(row)


async def retry(
    db: Connections,
    job_id: str,
    tenant_id: str | None,
    include_cancelled: bool,
    actor: str | None,
    now: int,
) -> JobRecord:
    args = (job_id, tenant_id, include_cancelled, now, actor, db.channel)
    async with db.conn() as conn:
        try:
            row = await conn.fetchrow(db.q["retry"], *args)
        except asyncpg.UniqueViolationError:
            # A live row took the key between our look and our write: look again.
            row = await conn.fetchrow(db.q["retry"], *args)
    if row is None:
        raise JobNotFoundError(job_id, tenant_id)
    if row["id"] is None:
        previous = rows.job_state(row["previous_state"])
        if rules.can_retry(previous, include_cancelled) and row["holder_id"] is not None:
            raise JobDuplicateError(
                row["target_name"], row["target_key"], row["holder_id"], row["target_tenant"]
            )
        raise JobNotRetryableError(job_id, previous)
    return rows.job(row)


async def record_event(db: Connections, event: EventRecord) -> None:
    async with db.conn() as conn:
        await conn.execute(
            db.q["record_event"],
            event.job_id,
            event.at,
            event.kind,
            event.actor,
            event.tenant_id,
            rows.dump(event.data),
        )
