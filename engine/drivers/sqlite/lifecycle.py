"""Job lifecycle operations as plain functions of a connection, run inside the executor's
transaction. The transitions come from engine.rules (in SQL where a statement computes them,
pinned by tests/sqlite/test_rules_sql.py), as in the memory driver."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

from engine import paging, rules
from engine.driver_errors import StoreDamagedError
from engine.drivers.base import AckWrite
from engine.drivers.damage import UndecodableRow, burial, log_burial, read_or_name
from engine.drivers.sqlite import queries as q
from engine.drivers.sqlite.codec import (
    dumps,
    error_text,
    event_from_row,
    event_params,
    job_from_row,
    job_state,
    step_from_row,
)
from engine.drivers.sqlite.connection import each_item
from engine.drivers.sqlite.errors import (
    UNBINDABLE,
    is_busy,
    live_key_broken,
    live_key_off,
    undecodable,
)
from engine.drivers.sqlite.library import sqlite3
from engine.errors import (
    JobDuplicateError,
    JobNotCancellableError,
    JobNotFoundError,
    JobNotRetryableError,
    JobRowStatusUnknownError,
    JobsError,
    JobSlotLostError,
)
from engine.lease_expiry import lease_expired_data, lost_lease_event
from schemas.events import EventRecord
from schemas.jobs import (
    ClaimedJob,
    ClaimExclusion,
    EnqueueRequest,
    EnqueueResult,
    HeartbeatResult,
    JobFilter,
    JobPage,
    JobRecord,
    NackOptions,
)
from schemas.states import JOB_STATES
from schemas.stats import QueueStats
from schemas.steps import StepRecord
from schemas.trace import TracePage, TraceQuery

_TENANT = 4  # index of tenant_id in JOB_COLUMNS: checked before a row is decoded

logger = logging.getLogger(__name__)


def enqueue(
    conn: sqlite3.Connection, path: str, requests: Sequence[EnqueueRequest], now: int
) -> tuple[list[EnqueueResult], bool]:
    """Insert each request unless a live row (possibly an earlier item of this batch, already
    inserted in this transaction) holds its key. Returns the results and whether any row was
    inserted. A `JobDuplicateError` aborts the op, and its savepoint takes every insert back.
    A batch goes in as one statement (q.INSERT_JOBS) when JSON carries it exactly (`_packable`),
    else one INSERT_JOB a row; the holders of deduped keys are looked up alike after."""
    results: list[EnqueueResult] = []
    inserted = False
    rows = [_enqueue_row(request, now) for request in requests]
    went_in = _inserted(conn, path, rows) if len(rows) > 1 and _packable(rows) else None
    for request, params in zip(requests, rows, strict=True):
        state = params["state"]
        went = request.id in (_inserted(conn, path, [params]) if went_in is None else went_in)
        if went:
            inserted = True
            results.append(
                EnqueueResult(id=request.id, run_id=request.run_id, deduped=False, state=state)
            )
            continue
        holder = conn.execute(q.FIND_LIVE, params).fetchone()
        if holder is None:  # the index and FIND_LIVE disagree: the very bug rule 2 forbids
            raise live_key_broken(path, "ON CONFLICT skipped a row no live row holds")
        if request.on_conflict == "error":
            raise JobDuplicateError(
                request.name, request.idempotency_key, holder[0], request.tenant_id
            )
        results.append(
            EnqueueResult(id=holder[0], run_id=holder[1], deduped=True, state=job_state(holder[2]))
        )
    return results, inserted


def _enqueue_row(request: EnqueueRequest, now: int) -> dict[str, Any]:
    """INSERT_JOB's parameters for one request."""
    return {
        "id": request.id,
        "run_id": request.run_id,
        "name": request.name,
        "queue": request.queue,
        "tenant_id": request.tenant_id,
        "idempotency_key": request.idempotency_key,
        "input": json.dumps(request.input, separators=(",", ":")),
        "state": request.initial_state(now),
        "max_attempts": request.max_attempts,
        "run_at": request.run_at,
        "now": now,
        "timeout_ms": request.timeout_ms,
        "traceparent": request.traceparent,
        "enqueued_by": request.enqueued_by,
        "priority": request.priority,
    }


_INT64 = range(-(2**63), 2**63)


def _packable(rows: Sequence[dict[str, Any]]) -> bool:
    """Whether JSON carries these rows to SQLite exactly as binding them would: distinct ids
    (RETURNING names rows by id), whole numbers within 64 bits (JSON would turn a bigger one
    into a float where binding refuses it) and no NUL in a text (JSON's escape of NUL need not
    come back as the same text). Otherwise the batch goes one statement per row."""
    if len({row["id"] for row in rows}) != len(rows):
        return False
    for row in rows:
        for value in row.values():
            if isinstance(value, str):
                if "\x00" in value:
                    return False
            elif value is not None and (not isinstance(value, int) or value not in _INT64):
                return False
    return True


def _inserted(conn: sqlite3.Connection, path: str, rows: Sequence[dict[str, Any]]) -> set[str]:
    """Insert one row (q.INSERT_JOB) or a packable batch (q.INSERT_JOBS): the ids that went in."""
    try:
        if len(rows) == 1:
            row = rows[0]
            return {row["id"]} if conn.execute(q.INSERT_JOB, row).rowcount == 1 else set()
        return _insert_set(conn, rows)
    except sqlite3.OperationalError as exc:
        # Without the index as declared the ON CONFLICT target matches nothing: a plain SQL
        # error whose usual fix, `db migrate`, would not bring the index back.
        if is_busy(exc) or not live_key_off(conn):
            raise
        raise live_key_broken(path, f"{exc.sqlite_errorname}: {exc}") from exc


def _insert_set(conn: sqlite3.Connection, rows: Sequence[dict[str, Any]]) -> set[str]:
    """Insert the batch with one statement (q.INSERT_JOBS): the ids that went in."""
    packed = json.dumps(
        [[row[column] for column in q.ENQUEUE_ROW] for row in rows],
        ensure_ascii=False,  # a lone surrogate fails at the bind, as the per-row INSERT's does
        separators=(",", ":"),
    )
    return {row_id for (row_id,) in conn.execute(q.INSERT_JOBS, {"rows": packed})}


def claim(
    conn: sqlite3.Connection,
    worker_id: str,
    limit: int,
    lease_ms: int,
    queues: Sequence[str] | None,
    now: int,
    path: str,
    excluding: ClaimExclusion | None = None,
    take_over: bool = True,
) -> list[ClaimedJob]:
    """`take_over=False` leaves the jobs whose lease ran out to their holders (LeaseGrace)."""
    if limit <= 0 or (queues is not None and not queues):
        return []  # SQLite reads a negative LIMIT as none at all
    expires = now + lease_ms
    params: dict[str, object] = {
        "worker_id": worker_id,
        "expires": expires,
        "now": now,
        "limit": limit,
        "queues": None if queues is None else json.dumps(list(queues)),
        "excluded_queues": _json_set(excluding and excluding.queues),
        "excluded_names": _json_set(excluding and excluding.names),
        "excluded_tenants": _json_set(excluding and excluding.tenants),
    }
    # The leases it may take over, as they stand: the event of each attempt lost reads them.
    lapsed = {r[0]: r[1:] for r in conn.execute(q.LAPSED, params)} if take_over else {}
    params["lapsed"] = json.dumps(list(lapsed))
    rows = conn.execute(q.CLAIM, params).fetchall()
    claimed = []
    for row in rows:
        try:
            record = job_from_row(row[:-2])
        except UndecodableRow as exc:
            # The others claimed with it still run; this one is settled without being read.
            _bury(conn, exc.job_id, row[-2], row[_TENANT], undecodable(path, exc), now)
            continue
        held = lapsed.get(record.id)
        if held is not None:
            data = lease_expired_data(*held)
            lost = lost_lease_event(record.id, record.tenant_id, data, worker_id, now)
            conn.execute(q.INSERT_EVENT, event_params(lost))
        # Past its first attempt, or steps stored: its steps are read.
        claimed.append(
            ClaimedJob(
                record=record, token=row[-2], lease_expires_at=expires, has_steps=bool(row[-1])
            )
        )
    claimed.sort(key=lambda c: rules.claim_rank(c.record))  # RETURNING has no order
    return claimed


def _json_set(names: frozenset[str] | None) -> str | None:
    return json.dumps(sorted(names)) if names else None


def _bury(
    conn: sqlite3.Connection,
    job_id: str,
    token: str,
    tenant_id: object,
    damage: StoreDamagedError,
    now: int,
) -> None:
    options, outcome = burial(damage, now)
    conn.execute(
        q.BURY,
        {
            "id": job_id,
            "token": token,
            "state": outcome.state,
            "now": now,
            "finished_at": outcome.finished_at,
            "last_error": error_text(options.error),
        },
    )
    if outcome.event is not None:
        data = rules.nack_event_data(options, 0, None)
        data.pop("attempt")  # the row's, which may be what cannot be read
        tenant = tenant_id if isinstance(tenant_id, str) else None
        event = EventRecord(job_id=job_id, at=now, kind=outcome.event, tenant_id=tenant, data=data)
        conn.execute(q.INSERT_EVENT, event_params(event))
    log_burial("sqlite", outcome.state, damage)


def _held(conn: sqlite3.Connection, job_id: str, token: str) -> JobRecord:
    row = conn.execute(q.SELECT_HELD, {"id": job_id}).fetchone()
    if row is None or row[-1] != token:
        raise JobSlotLostError(job_id)
    job = job_from_row(row[:-1])
    if job.state != "running":
        raise JobSlotLostError(job_id)
    return job


def heartbeat(
    conn: sqlite3.Connection, job_id: str, token: str, lease_ms: int, now: int
) -> HeartbeatResult:
    row = conn.execute(
        "SELECT state, token, lease_expires_at FROM mcp_jobs_jobs WHERE id = :id", {"id": job_id}
    ).fetchone()
    if row is None or row[1] != token:
        raise JobSlotLostError(job_id)
    if row[0] == "cancelled":
        # A cancel keeps the token precisely so that this beat can say so.
        return HeartbeatResult(lease_expires_at=row[2] or 0, cancel_requested=True)
    if row[0] != "running":
        raise JobSlotLostError(job_id)
    expires = now + lease_ms
    conn.execute(q.EXTEND_LEASE, {"id": job_id, "expires": expires})
    conn.execute(q.EXTEND_SLOTS, {"id": job_id, "expires": expires})
    return HeartbeatResult(lease_expires_at=expires, cancel_requested=False)


def ack_many(
    conn: sqlite3.Connection, path: str, writes: Sequence[AckWrite], now: int
) -> list[JobsError | None]:
    """Settle each held job as done (rules.ack_transition, in SQL: `q.ACK_MANY`, `q.ACK`): a lost
    slot or a refused output fails that item only.

    The batch goes in one statement (and one slot release) when it can: each item's fenced
    match stands alone in it, so an item whose token is stale is simply not matched and fails
    alone. A batch naming one job twice, or one SQLite refuses as a whole (an output too
    big, say), goes item by item under savepoints instead, which says whose it was."""
    outputs = [dumps(write.output) for write in writes]
    ids = [write.job_id for write in writes]
    if len(writes) > 1 and len(set(ids)) == len(ids):
        items = [[w.job_id, w.token, out] for w, out in zip(writes, outputs, strict=True)]
        conn.execute("SAVEPOINT ack_many")
        try:
            acked = {
                row_id
                for (row_id,) in conn.execute(
                    q.ACK_MANY,
                    {"items": json.dumps(items, ensure_ascii=False), "now": now},
                )
            }
            conn.execute(q.RELEASE_SLOTS_MANY, {"job_ids": json.dumps(sorted(acked))})
        except (sqlite3.Error, *UNBINDABLE) as exc:
            # Item by item below, which says whose value it was.
            if not conn.in_transaction or is_busy(exc):
                raise
            conn.execute("ROLLBACK TO ack_many")
            conn.execute("RELEASE ack_many")
        else:
            conn.execute("RELEASE ack_many")
            return [None if w.job_id in acked else JobSlotLostError(w.job_id) for w in writes]

    def ack(write: AckWrite) -> None:
        params = {"id": write.job_id, "token": write.token, "output": dumps(write.output)}
        if conn.execute(q.ACK, {**params, "now": now}).rowcount != 1:
            raise JobSlotLostError(write.job_id)
        conn.execute(q.RELEASE_SLOTS, {"job_id": write.job_id})

    return each_item(conn, path, writes, ack)


def _write(conn: sqlite3.Connection, record: JobRecord, token: str | None) -> None:
    conn.execute(
        q.UPDATE_JOB,
        {
            "id": record.id,
            "state": record.state,
            "attempt": record.attempt,
            "run_at": record.run_at,
            "queued_at": record.queued_at,
            "updated_at": record.updated_at,
            "finished_at": record.finished_at,
            "last_error": error_text(record.last_error),
            "worker_id": record.worker_id,
            "lease_expires_at": record.lease_expires_at,
            "cancel_requested": int(record.cancel_requested),
            "token": token,
        },
    )


def _event(
    conn: sqlite3.Connection,
    job: JobRecord,
    kind: str,
    now: int,
    data: dict[str, Any] | None,
    actor: str | None = None,
) -> None:
    event = EventRecord(
        job_id=job.id, at=now, kind=kind, actor=actor, tenant_id=job.tenant_id, data=data
    )
    conn.execute(q.INSERT_EVENT, event_params(event))


def nack(
    conn: sqlite3.Connection, job_id: str, token: str, options: NackOptions, now: int
) -> JobRecord:
    job = _held(conn, job_id, token)
    conn.execute(q.RELEASE_SLOTS, {"job_id": job_id})
    record = rules.apply_nack(job, options, now)
    _write(conn, record, None)
    kind = rules.event_kind_for(options)
    if kind is not None:
        _event(conn, job, kind, now, rules.nack_event_data(options, job.attempt, record.run_at))
    return record


def _find(conn: sqlite3.Connection, job_id: str, tenant_id: str | None) -> tuple[JobRecord, Any]:
    row = conn.execute(q.SELECT_HELD, {"id": job_id}).fetchone()
    # Tenant first, decode second: another tenant's row is "not found" whatever it holds.
    if row is None or (tenant_id is not None and row[_TENANT] != tenant_id):
        raise JobNotFoundError(job_id, tenant_id)
    return job_from_row(row[:-1]), row[-1]


def get(conn: sqlite3.Connection, job_id: str, tenant_id: str | None) -> JobRecord:
    return _find(conn, job_id, tenant_id)[0]


def list_jobs(conn: sqlite3.Connection, filter: JobFilter, path: str) -> JobPage:
    """A page of jobs; a row that cannot be read is named in its place, not fatal."""
    params = {
        "name": filter.name,
        "queue": filter.queue,
        "tenant_id": filter.tenant_id,
        "cursor": filter.cursor,
        "limit": filter.limit + 1,
    }
    unfiltered = (filter.states, filter.name, filter.queue, filter.tenant_id) == (None,) * 4
    sql = (
        q.LIST_ALL
        if unfiltered
        else q.list_jobs_sql(
            filter.states, filter.name, filter.queue, filter.tenant_id, filter.cursor
        )
    )
    rows = conn.execute(sql, params).fetchall()
    found = [read_or_name(row, job_from_row, lambda exc: undecodable(path, exc)) for row in rows]
    return paging.cut_page(found, filter.limit)


def load_steps(conn: sqlite3.Connection, run_id: str) -> list[StepRecord]:
    return [step_from_row(r) for r in conn.execute(q.SELECT_STEPS, {"run_id": run_id})]


def load_trace(
    conn: sqlite3.Connection, job_id: str, tenant_id: str | None, page: TraceQuery
) -> TracePage:
    job, _ = _find(conn, job_id, tenant_id)
    started_at, pos = (
        (None, None)
        if page.steps_cursor is None
        else paging.parse_step_cursor(page.steps_cursor, job_id)
    )
    step_rows = conn.execute(
        q.PAGE_STEPS,
        {"run_id": job.run_id, "started_at": started_at, "pos": pos, "limit": page.steps_limit + 1},
    ).fetchall()
    before = (
        None
        if page.events_cursor is None
        else paging.parse_event_cursor(page.events_cursor, job_id)
    )
    event_rows = conn.execute(
        q.PAGE_EVENTS, {"job_id": job_id, "before": before, "limit": page.events_limit + 1}
    ).fetchall()
    steps = step_rows[: page.steps_limit][::-1]
    events = event_rows[: page.events_limit][::-1]
    (steps_total,) = conn.execute(q.COUNT_STEPS, {"run_id": job.run_id}).fetchone()
    (events_total,) = conn.execute(q.COUNT_EVENTS, {"job_id": job_id}).fetchone()
    more_steps = len(step_rows) > page.steps_limit
    more_events = len(event_rows) > page.events_limit
    first_step = steps[0] if steps else None
    return TracePage(
        job=job,
        steps=[step_from_row(r[:-1]) for r in steps],
        events=[event_from_row(r[:-1]) for r in events],
        steps_total=steps_total,
        events_total=events_total,
        steps_cursor=(
            paging.step_cursor(job_id, first_step[6], first_step[-1])
            if more_steps and first_step
            else None
        ),
        events_cursor=paging.event_cursor(job_id, events[0][-1])
        if more_events and events
        else None,
    )


def stats_params(
    now: int, queues: Sequence[str] | None, tenant_id: str | None
) -> dict[str, object]:
    """The stats statement's parameters."""
    return {
        "now": now,
        "queues": None if queues is None else json.dumps(list(queues)),
        "tenant": tenant_id,
        "recent": now - rules.RECENT_SETTLED_MS,
        "cap": rules.RECENT_SETTLED_CAP,
    }


def stats(
    conn: sqlite3.Connection, queues: Sequence[str] | None, tenant_id: str | None, now: int
) -> list[QueueStats]:
    params = stats_params(now, queues, tenant_id)
    found: list[QueueStats] = []
    for row in conn.execute(q.STATS, params):
        unknown = row[-1]
        if unknown is not None:
            raise JobRowStatusUnknownError("mcp_jobs_jobs", "state", unknown, JOB_STATES)
        found.append(QueueStats(queue=row[0], **dict(zip(q.STATS_FIELDS, row[1:-1], strict=True))))
    return found


def cancel(
    conn: sqlite3.Connection, job_id: str, tenant_id: str | None, actor: str | None, now: int
) -> JobRecord:
    job, token = _find(conn, job_id, tenant_id)
    if not rules.can_cancel(job.state):
        raise JobNotCancellableError(job_id, job.state)
    record = rules.cancel_transition(job, now)
    # A running row keeps its token, so the holder's next heartbeat learns of the cancel.
    _write(conn, record, token if record.cancel_requested else None)
    _event(conn, job, "cancelled", now, rules.cancel_event_data(job.state), actor)
    return record


def retry(
    conn: sqlite3.Connection,
    job_id: str,
    tenant_id: str | None,
    include_cancelled: bool,
    actor: str | None,
    now: int,
) -> JobRecord:
    job, _ = _find(conn, job_id, tenant_id)
    if not rules.can_retry(job.state, include_cancelled):
        raise JobNotRetryableError(job_id, job.state)
    holder = conn.execute(
        q.FIND_LIVE,
        {"name": job.name, "tenant_id": job.tenant_id, "idempotency_key": job.idempotency_key},
    ).fetchone()
    if holder is not None and holder[0] != job_id:  # a delayed job holds its own key
        raise JobDuplicateError(job.name, job.idempotency_key, holder[0], job.tenant_id)
    record = rules.retry_transition(job, now)
    _write(conn, record, None)
    _event(conn, job, "requeued", now, rules.retry_event_data(job.state), actor)
    return record


def record_event(conn: sqlite3.Connection, event: EventRecord) -> None:
    conn.execute(q.INSERT_EVENT, event_params(event))
