"""Everything beside the job row, as plain functions of a connection: steps, limiter slots,
workers, the backfill ledger, the scheduler and the outbox. Each mirrors the memory driver."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

from engine.drivers.base import RunPosition, StepWrite
from engine.drivers.damage import or_none, readable, stored_failure
from engine.drivers.sqlite import lifecycle
from engine.drivers.sqlite import queries as q
from engine.drivers.sqlite.codec import (
    backfill_from_row,
    backfill_params,
    outbox_from_row,
    step_params,
    worker_from_row,
    worker_params,
)
from engine.drivers.sqlite.connection import each_item
from engine.drivers.sqlite.library import sqlite3
from engine.errors import JobsError, JobSlotLostError
from engine.presence import EXPIRED_PER_BEAT, expired_before
from schemas.backfill import BackfillRun
from schemas.jobs import EnqueueRequest, EnqueueResult
from schemas.outbox import OutboxRow, OutboxWaiting
from schemas.scheduler import TaskFailure, TaskState
from schemas.states import BackfillStatus
from schemas.stats import WorkerInfo

# --- steps (rule 6) -----------------------------------------------------------------------------


def save_steps_many(
    conn: sqlite3.Connection, path: str, writes: Sequence[StepWrite]
) -> list[JobsError | None]:
    """Upsert each step, fenced: a holder whose lease moved on cannot write over the run's steps.
    Each write under its own savepoint, so one refusal fails only that write."""

    def save(write: StepWrite) -> None:
        held = {"id": write.job_id, "token": write.token}
        if conn.execute(q.HOLDS_RUNNING, held).fetchone() is None:
            raise JobSlotLostError(write.job_id)
        conn.execute(q.UPSERT_STEP, step_params(write.step))

    return each_item(conn, path, writes, save)


# --- limiter slots ------------------------------------------------------------------------------


def acquire_slots(
    conn: sqlite3.Connection,
    job_id: str,
    caps: Sequence[tuple[str, int]],
    expires_at: int,
    now: int,
) -> str | None:
    """All or nothing, inside one write transaction, so two workers cannot both take the last
    slot: returns the first key at its cap, or None once every slot is held."""
    for key, cap in caps:
        params = {"key": key, "now": now, "job_id": job_id}
        (taken,) = conn.execute(q.COUNT_SLOTS, params).fetchone()
        if taken >= cap:
            return key
    for key, _ in caps:
        conn.execute(q.UPSERT_SLOT, {"key": key, "job_id": job_id, "expires_at": expires_at})
    return None


def release_slots(conn: sqlite3.Connection, job_id: str) -> None:
    conn.execute(q.RELEASE_SLOTS, {"job_id": job_id})


# --- workers ------------------------------------------------------------------------------------


def worker_seen(conn: sqlite3.Connection, info: WorkerInfo, now: int) -> None:
    """Record `info`'s beat, and delete a few other workers' expired rows (engine.presence)."""
    conn.execute(q.UPSERT_WORKER, worker_params(info))
    params = {"id": info.id, "before": expired_before(now), "limit": EXPIRED_PER_BEAT}
    conn.execute(q.EXPIRE_WORKERS, params)


def worker_gone(conn: sqlite3.Connection, worker_id: str) -> None:
    conn.execute(q.DELETE_WORKER, {"id": worker_id})


def live_workers(conn: sqlite3.Connection, seen_since: int) -> list[WorkerInfo]:
    # A row another program wrote is no live worker: left out until it expires.
    found = conn.execute(q.LIVE_WORKERS, {"since": seen_since})
    return readable(found, worker_from_row, lambda r: f"mcp_jobs_workers row {r[0]!r}")


# --- backfill ledger ----------------------------------------------------------------------------


def backfill_save(conn: sqlite3.Connection, run: BackfillRun) -> None:
    conn.execute(q.UPSERT_BACKFILL, backfill_params(run))


def backfill_runs(
    conn: sqlite3.Connection,
    name: str | None,
    environment: str | None,
    status: BackfillStatus | None = None,
    before: RunPosition | None = None,
    limit: int | None = None,
) -> list[BackfillRun]:
    """Newest first; one name in one environment reads only its page (see the query)."""
    sql = q.select_backfills_sql(
        name is not None,
        environment is not None,
        status is not None,
        before is not None,
        limit is not None,
    )
    params = {
        "name": name,
        "environment": environment,
        "status": status,
        "before_at": before.started_at if before is not None else None,
        "before_id": before.run_id if before is not None else None,
        "limit": limit,
    }
    return [backfill_from_row(r) for r in conn.execute(sql, params)]


# --- scheduler ----------------------------------------------------------------------------------


def task_state(conn: sqlite3.Connection, task: str) -> TaskState | None:
    row = conn.execute(q.SELECT_TASK, {"task": task}).fetchone()
    if row is None:
        return None
    # Another program's value is no state: the task fires from now, its keys dedupe a repeat.
    failure = stored_failure(row[3], task)
    state = partial(TaskState, task=row[0], last_fired_at=row[1], updated_at=row[2])
    return or_none(partial(state, failure=failure), f"the scheduler state of task {task!r}")


def task_claim(
    conn: sqlite3.Connection, task: str, expected: int | None, occurrence_ms: int, now: int
) -> bool:
    # One write transaction (BEGIN IMMEDIATE): the read and the write are one step, and the
    # state is compared as task_state reads it, damaged state included (it reads as none).
    current = task_state(conn, task)
    if (current.last_fired_at if current is not None else None) != expected:
        return False
    conn.execute(q.TASK_CLAIMED, {"task": task, "occurrence": occurrence_ms, "now": now})
    return True


def task_fire(
    conn: sqlite3.Connection,
    path: str,
    task: str,
    expected: int | None,
    occurrence_ms: int,
    requests: Sequence[EnqueueRequest],
    now: int,
) -> tuple[list[EnqueueResult] | None, bool]:
    """The claim (as `task_claim`) and the occurrences' jobs in one transaction: a process that
    dies before it commits leaves the occurrence unclaimed, for the next round to fire. Also
    says whether a job was inserted."""
    if not task_claim(conn, task, expected, occurrence_ms, now):
        return None, False
    if not requests:
        return [], False
    return lifecycle.enqueue(conn, path, requests, now)


def task_failure(conn: sqlite3.Connection, task: str, failure: TaskFailure, now: int) -> None:
    conn.execute(q.TASK_FAILURE, {"task": task, "now": now, "failure": failure.model_dump_json()})


# --- outbox -------------------------------------------------------------------------------------


def outbox_claim(
    conn: sqlite3.Connection, token: str, limit: int, lease_ms: int, now: int
) -> list[OutboxRow]:
    if limit <= 0:
        return []
    rows = conn.execute(
        q.OUTBOX_CLAIM, {"token": token, "expires": now + lease_ms, "now": now, "limit": limit}
    ).fetchall()
    # A row another program wrote stays claimed and comes back at its lease's end, as a row that
    # failed to publish does; the others go on.
    claimed = readable(rows, outbox_from_row, lambda r: f"mcp_jobs_outbox row {r[0]!r}")
    claimed.sort(key=lambda r: (r.staged_at, r.id))  # RETURNING has no order
    return claimed


def outbox_publish(
    conn: sqlite3.Connection, path: str, token: str, rows: Sequence[OutboxRow], now: int
) -> tuple[list[EnqueueResult], bool]:
    """Enqueue the rows `token` still owns and mark them published, in one transaction: the
    stamp is first-writer-wins (`published_at IS NULL`), so a relay that lost its claim
    publishes nothing twice."""
    owned: list[OutboxRow] = []
    for row in rows:
        found = conn.execute(q.OUTBOX_OWNED, {"id": row.id, "token": token}).fetchone()
        if found is not None:
            owned.append(outbox_from_row(found))
    if not owned:
        return [], False
    results, inserted = lifecycle.enqueue(conn, path, [r.request for r in owned], now)
    for row, result in zip(owned, results, strict=True):
        conn.execute(q.OUTBOX_PUBLISHED, {"id": row.id, "job_id": result.id, "now": now})
    return results, inserted


def outbox_release(conn: sqlite3.Connection, token: str, ids: Sequence[str]) -> None:
    for row_id in ids:
        conn.execute(q.OUTBOX_RELEASE, {"id": row_id, "token": token})


def outbox_waiting(conn: sqlite3.Connection, limit: int) -> OutboxWaiting:
    count, oldest = conn.execute(q.OUTBOX_WAITING, {"limit": limit}).fetchone()
    return OutboxWaiting(count=count, oldest_staged_at=oldest)


def outbox_forget_published(conn: sqlite3.Connection, published_before: int, limit: int) -> int:
    return conn.execute(
        q.OUTBOX_FORGET_PUBLISHED, {"before": published_before, "limit": limit}
    ).rowcount
