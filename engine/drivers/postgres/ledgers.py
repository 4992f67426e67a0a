"""The small tables beside the jobs over PostgreSQL, one function each: limiter slots, worker
presence, the backfill ledger and the scheduler's state and leadership lease.

Every one is safe to repeat (an upsert, a delete, a read, or a decision that a second run for
the same caller makes the same way), so each runs through `Connections.idempotent`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from engine.drivers.base import RunPosition
from engine.drivers.postgres import rows
from engine.drivers.postgres.connections import Connections
from engine.drivers.postgres.enqueue import Enqueuer
from engine.drivers.postgres.schema_version import Conn
from engine.presence import EXPIRED_PER_BEAT, expired_before
from schemas.backfill import BackfillRun
from schemas.jobs import EnqueueRequest, EnqueueResult
from schemas.scheduler import TaskFailure, TaskState
from schemas.states import BackfillStatus
from schemas.stats import WorkerInfo

# --- limiter slots ----------------------------------------------------------------------------


async def acquire_slots(
    db: Connections, job_id: str, caps: Sequence[tuple[str, int]], now: int, expires_at: int
) -> str | None:
    if not caps:
        return None
    # Re-running it for the same job decides the same way (its own slot never counts).
    args = (job_id, [k for k, _ in caps], [c for _, c in caps], now, expires_at)
    blocked: str | None = await db.idempotent(lambda c: c.fetchval(db.q["acquire_slots"], *args))
    return blocked


async def release_slots(db: Connections, job_id: str) -> None:
    await db.idempotent(lambda c: c.execute(db.q["release_slots"], job_id))


# --- workers ----------------------------------------------------------------------------------


async def worker_seen(db: Connections, info: WorkerInfo, now: int) -> None:
    args = (
        info.id,
        info.hostname,
        info.pid,
        info.queues,
        info.concurrency,
        info.started_at,
        info.last_seen_at,
        expired_before(now),
        EXPIRED_PER_BEAT,
        now,
        None if info.caps is None else json.dumps(info.caps),
    )
    followed = await db.idempotent(lambda c: c.fetchval(db.q["worker_seen"], *args))
    db.changes_followed = bool(followed)


# A process that follows changes holds a lease named so; workers read it at their beat.
FOLLOWERS_PREFIX = "followers:"


async def worker_gone(db: Connections, worker_id: str) -> None:
    await db.idempotent(lambda c: c.execute(db.q["worker_gone"], worker_id))


async def live_workers(db: Connections, seen_since: int) -> list[WorkerInfo]:
    found = await db.idempotent(lambda c: c.fetch(db.q["live_workers"], seen_since))
    return [rows.worker(row) for row in found]


# --- backfill ledger --------------------------------------------------------------------------


async def backfill_save(db: Connections, run: BackfillRun) -> None:
    args = (
        run.run_id,
        run.name,
        run.checksum,
        run.environment,
        run.status,
        run.app_version,
        run.rows_processed,
        run.rows_total,
        rows.dump(run.cursor),
        run.job_id,
        run.started_at,
        run.finished_at,
        run.error,
    )
    await db.idempotent(lambda c: c.execute(db.q["backfill_save"], *args))


async def backfill_runs(
    db: Connections,
    name: str | None = None,
    environment: str | None = None,
    *,
    status: BackfillStatus | None = None,
    before: RunPosition | None = None,
    limit: int | None = None,
) -> list[BackfillRun]:
    """Newest first. One name in one environment reads its page by index (the `_of` queries,
    one per shape so each plan holds the index order); any other filter, the general query."""
    query: str
    args: tuple[object, ...]
    at, run_id = (before.started_at, before.run_id) if before is not None else (None, None)
    if name is None or environment is None:
        query, args = db.q["backfill_runs"], (name, environment, status, at, run_id, limit)
    elif status is None:
        query, args = (
            (db.q["backfill_runs_of"], (name, environment, limit))
            if before is None
            else (db.q["backfill_runs_of_before"], (name, environment, at, run_id, limit))
        )
    else:
        query, args = (
            (db.q["backfill_status_of"], (name, environment, status, limit))
            if before is None
            else (
                db.q["backfill_status_of_before"],
                (name, environment, status, at, run_id, limit),
            )
        )
    found = await db.idempotent(lambda c: c.fetch(query, *args))
    return [rows.backfill(row) for row in found]


# --- scheduler --------------------------------------------------------------------------------


async def task_state(db: Connections, task: str) -> TaskState | None:
    row = await db.idempotent(lambda c: c.fetchrow(db.q["task_state"], task))
    return rows.task(row) if row is not None else None


async def task_claim(
    db: Connections, task: str, expected: int | None, occurrence_ms: int, now: int
) -> bool:
    # Atomic, not idempotent: a rerun through a connection that broke after the commit would
    # find its own claim and answer lost (the occurrence would then fire never, not twice).
    args: tuple[object, ...] = (task, occurrence_ms, now)
    query = db.q["task_claim_first"]
    if expected is not None:
        args, query = (task, expected, occurrence_ms, now), db.q["task_claim"]
    claimed = await db.atomic(lambda c: c.fetchval(query, *args))
    return claimed is not None


async def task_fire(
    db: Connections,
    enqueuer: Enqueuer,
    task: str,
    expected: int | None,
    occurrence_ms: int,
    requests: Sequence[EnqueueRequest],
    now: int,
) -> list[EnqueueResult] | None:
    """The claim (as `task_claim`) and the occurrences' jobs in one transaction, on the
    enqueuer's own statements (as the outbox publishes): a process that dies before it
    commits leaves the occurrence unclaimed, for the next round to fire."""
    args: tuple[object, ...] = (task, occurrence_ms, now)
    query = db.q["task_claim_first"]
    if expected is not None:
        args, query = (task, expected, occurrence_ms, now), db.q["task_claim"]

    async def once(conn: Conn) -> tuple[list[EnqueueResult] | None, bool]:
        async with conn.transaction():
            if await conn.fetchval(query, *args) is None:
                return None, False
            if not requests:
                return [], False
            return await enqueuer.enqueue_on(conn, requests, now=now)

    # Atomic, as task_claim: a rerun through a broken connection could find its own claim.
    results, inserted = await db.atomic(once)
    if inserted:
        enqueuer.signal.notify()
    return results


async def task_failure(db: Connections, task: str, failure: TaskFailure, now: int) -> None:
    stored = failure.model_dump_json()
    await db.idempotent(lambda c: c.execute(db.q["task_failure"], task, now, stored))
