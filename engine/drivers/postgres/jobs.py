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

from engine import paging, rules
from engine.drivers.damage import UndecodableRow, read_or_name
from engine.drivers.postgres import rows
from engine.drivers.postgres.connections import Connections
from engine.drivers.postgres.schema_version import Conn
from engine.drivers.postgres.sql import with_schema
from engine.errors import (
    JobDuplicateError,
    JobNotCancellableError,
    JobNotFoundError,
    JobNotRetryableError,
    JobSlotLostError,
)
from schemas.events import EventRecord
from schemas.jobs import JobFilter, JobPage, JobRecord, NackOptions
from schemas.states import JOB_STATES, LIVE_STATES, SETTLED_STATES
from schemas.stats import QueueStats
from schemas.trace import TracePage, TraceQuery


async def nack(
    db: Connections, job_id: str, token: str, options: NackOptions, now: int
) -> JobRecord:
    """Hand a claimed job back. The next state, run_at and event come from `rules`; the
    attempt and queued_at, which need the held row, are computed in the statement."""
    return rows.record(await nack_row(db, job_id, token, options, now), db)


async def nack_row(
    db: Connections, job_id: str, token: str, options: NackOptions, now: int
) -> asyncpg.Record:
    """`nack`'s write, answering the row as stored: a claim burying a row it cannot read
    settles it without reading it back."""
    outcome = rules.nack_transition(options, now, 0, 0)
    error = options.error.model_dump_json() if options.error is not None else None

    async def once(first: bool) -> asyncpg.Record:
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
        return row

    return await db.retry.resilient(once)


async def get(db: Connections, job_id: str, tenant_id: str | None = None) -> JobRecord:
    q = db.q["get"]
    row = await db.idempotent(lambda c: c.fetchrow(q, job_id, tenant_id))
    if row is None:
        raise JobNotFoundError(job_id, tenant_id)
    return rows.record(row, db)


_LIVE = f"state IN ({paging.quoted(LIVE_STATES)})"
_SETTLED = f"state IN ({paging.quoted(SETTLED_STATES)})"


def list_sql(filter: JobFilter) -> tuple[str, list[object]]:
    """A filtered list and its arguments: one arm over the live states it wants (jobs_live_idx
    walked back, at worst through the live rows), one per settled state, each cut to the page and
    merged by id. Only the filters given appear, so each statement's plan fits its filters;
    `{schema}` is left for the caller.

    The settled arms pick ids alone, an index-only walk of the settled index the filter leads
    (jobs_settled_name_idx, _queue_idx, _tenant_idx or _state_idx; each filter's index carries
    the other two filters, so a second one is tested on the entry), and the page's settled rows
    are then read by primary key. Fetching whole rows there, the planner walked the primary key
    back through every live row, or a state's index through other names' rows, whenever its
    column statistics said a match was near."""
    args: list[object] = []

    def arg(value: object, cast: str = "text") -> str:
        args.append(value)
        return f"${len(args)}::{cast}"

    terms = [
        f"{column} = {arg(value)}"
        for column, value in (
            ("name", filter.name),
            ("queue", filter.queue),
            ("tenant_id", filter.tenant_id),
        )
        if value is not None
    ]
    if filter.cursor is not None:
        terms.append(f"id < {arg(filter.cursor)}")
    limit = arg(filter.limit + 1, "integer")
    live, settled = paging.list_arms(filter.states)
    arms: list[str] = []
    if live:
        subset = "" if len(live) == len(LIVE_STATES) else f" AND state IN ({paging.quoted(live)})"
        where = " AND ".join([_LIVE + subset, *terms])
        arms.append(f"(SELECT * FROM {{schema}}.jobs WHERE {where} ORDER BY id DESC LIMIT {limit})")
    settled_ids = [
        f"(SELECT id FROM {{schema}}.jobs WHERE {_SETTLED} AND state = '{state}'"
        f"{''.join(f' AND {t}' for t in terms)} ORDER BY id DESC LIMIT {limit})"
        for state in settled
    ]
    if settled_ids:
        ids = settled_ids[0][1:-1]
        if len(settled_ids) > 1:
            ids = "\nUNION ALL\n".join(settled_ids) + f"\nORDER BY id DESC LIMIT {limit}"
        arms.append(
            f"(SELECT * FROM {{schema}}.jobs WHERE id = ANY(ARRAY({ids})) ORDER BY id DESC)"
        )
    if not arms:
        return "SELECT * FROM {schema}.jobs WHERE false", []
    if len(arms) == 1:
        return arms[0][1:-1], args
    return "\nUNION ALL\n".join(arms) + f"\nORDER BY id DESC LIMIT {limit}", args


async def list_jobs(db: Connections, filter: JobFilter) -> JobPage:
    unfiltered = (filter.states, filter.name, filter.queue, filter.tenant_id) == (None,) * 4
    args: list[object]
    if unfiltered:
        query, args = db.q["list_jobs"], [filter.cursor, filter.limit + 1]
    else:
        text, args = list_sql(filter)
        query = with_schema(text, db.schema)
    found = await db.fetch_for_values(query, *args)
    read = [read_or_name(row, rows.job, db.damaged) for row in found]
    return paging.cut_page(read, filter.limit)


async def load_trace(
    db: Connections, job_id: str, tenant_id: str | None, page: TraceQuery
) -> TracePage:
    step_at = (
        None if page.steps_cursor is None else paging.parse_step_cursor(page.steps_cursor, job_id)
    )
    before = (
        None
        if page.events_cursor is None
        else paging.parse_event_cursor(page.events_cursor, job_id)
    )

    async def read(conn: Conn) -> TracePage:
        row = await conn.fetchrow(db.q["get"], job_id, tenant_id)
        if row is None:
            raise JobNotFoundError(job_id, tenant_id)
        record = rows.record(row, db)
        run = record.run_id
        if step_at is None:
            steps = await conn.fetch(db.q["trace_steps_newest"], run, page.steps_limit + 1)
        else:
            steps = await conn.fetch(
                db.q["trace_steps_before"], run, *step_at, page.steps_limit + 1
            )
        if before is None:
            events = await conn.fetch(db.q["trace_events_newest"], job_id, page.events_limit + 1)
        else:
            events = await conn.fetch(
                db.q["trace_events_before"], job_id, before, page.events_limit + 1
            )
        steps_total = await conn.fetchval(db.q["trace_steps_count"], run)
        events_total = await conn.fetchval(db.q["trace_events_count"], job_id)
        step_page = steps[: page.steps_limit][::-1]
        event_page = events[: page.events_limit][::-1]
        more_steps = len(steps) > page.steps_limit and step_page
        more_events = len(events) > page.events_limit and event_page
        try:
            trace_events = [rows.event(e) for e in event_page]
        except UndecodableRow as exc:
            raise db.damaged(exc) from exc
        return TracePage(
            job=record,
            steps=[rows.step(s) for s in step_page],
            events=trace_events,
            steps_total=steps_total,
            events_total=events_total,
            steps_cursor=(
                paging.step_cursor(job_id, step_page[0]["started_at"], step_page[0]["seq"])
                if more_steps
                else None
            ),
            events_cursor=paging.event_cursor(job_id, event_page[0]["id"]) if more_events else None,
        )

    return await db.idempotent(read)


# The stats' upper bound of finished_at, past any row (the statement says why it is a parameter).
STATS_NO_LATER = 2**63 - 1


def stats_args(
    now: int, queues: Sequence[str] | None, tenant_id: str | None
) -> tuple[int, list[str] | None, str | None, int, int, int]:
    """The stats statement's arguments, in order."""
    listed = list(queues) if queues is not None else None
    recent = now - rules.RECENT_SETTLED_MS
    return (now, listed, tenant_id, recent, STATS_NO_LATER, rules.RECENT_SETTLED_CAP)


async def stats(
    db: Connections, now: int, queues: Sequence[str] | None = None, tenant_id: str | None = None
) -> list[QueueStats]:
    args = stats_args(now, queues, tenant_id)
    found = await db.idempotent(lambda c: c.fetch(db.q["stats"], *args), borrow=db.planned_once)
    # Sorted here, not in SQL: Python's code-point order, whatever the database collation.
    return sorted((rows.queue_stats(row) for row in found), key=lambda s: s.queue)


async def cancel(
    db: Connections, job_id: str, tenant_id: str | None, actor: str | None, now: int
) -> JobRecord:
    # One statement: run again only when rolled back, since a second run after one that
    # committed would find the job cancelled and refuse.
    row = await db.atomic(lambda c: c.fetchrow(db.q["cancel"], job_id, tenant_id, now, actor))
    if row is None:
        raise JobNotFoundError(job_id, tenant_id)
    if row["id"] is None:
        raise JobNotCancellableError(job_id, rows.job_state(row["previous_state"]))
    return rows.record(row, db)


async def retry(
    db: Connections,
    job_id: str,
    tenant_id: str | None,
    include_cancelled: bool,
    actor: str | None,
    now: int,
) -> JobRecord:
    allowed = [s for s in JOB_STATES if rules.can_retry(s, include_cancelled)]
    args = (job_id, tenant_id, allowed, now, actor, db.channel)

    async def requeue(conn: Conn) -> asyncpg.Record | None:
        try:
            return await conn.fetchrow(db.q["retry"], *args)
        except asyncpg.UniqueViolationError:
            # A live row took the key between our look and our write: look again.
            return await conn.fetchrow(db.q["retry"], *args)

    # Not repeated once it may have committed: it would requeue twice and log two events.
    row = await db.atomic(requeue)
    if row is None:
        raise JobNotFoundError(job_id, tenant_id)
    if row["id"] is None:
        previous = rows.job_state(row["previous_state"])
        if rules.can_retry(previous, include_cancelled) and row["holder_id"] is not None:
            raise JobDuplicateError(
                row["target_name"], row["target_key"], row["holder_id"], row["target_tenant"]
            )
        raise JobNotRetryableError(job_id, previous)
    return rows.record(row, db)


async def record_event(db: Connections, event: EventRecord) -> None:
    args = (event.job_id, event.at, event.kind, event.actor, event.tenant_id, rows.dump(event.data))
    # An insert without a key: one that may have committed is not sent again (two events).
    await db.atomic(lambda c: c.execute(db.q["record_event"], *args))
