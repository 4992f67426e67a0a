"""Rows to `schemas` models and back. Every status column is narrowed here, never cast (rule 5)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from engine.drivers.damage import UNDECODABLE, UndecodableRow, stored_caps
from engine.errors import JobRowStatusUnknownError
from schemas.backfill import BackfillRun
from schemas.errors import ErrorPayload
from schemas.events import EventRecord
from schemas.jobs import EnqueueRequest, JobRecord
from schemas.outbox import OutboxRow
from schemas.states import (
    BACKFILL_STATUSES,
    JOB_STATES,
    STEP_STATUSES,
    BackfillStatus,
    JobState,
    StepStatus,
)
from schemas.stats import WorkerInfo
from schemas.steps import StepRecord

# The column order every job SELECT uses; `job_from_row` reads rows in this order.
JOB_COLUMNS = (
    "id",
    "run_id",
    "name",
    "queue",
    "tenant_id",
    "idempotency_key",
    "input",
    "state",
    "attempt",
    "max_attempts",
    "run_at",
    "queued_at",
    "created_at",
    "updated_at",
    "finished_at",
    "timeout_ms",
    "last_error",
    "output",
    "worker_id",
    "lease_expires_at",
    "cancel_requested",
    "traceparent",
    "enqueued_by",
    "priority",
    "rerun_of",  # 0012 (engine/reruns.py)
    "progress",  # 0010 (engine/progress.py): JSON text, decoded by JobRecord
)
JOB_SELECT = ", ".join(JOB_COLUMNS)

STEP_COLUMNS = "job_id, run_id, name, status, output, error, started_at, finished_at, attempts"
EVENT_COLUMNS = "job_id, at, kind, actor, tenant_id, data"
WORKER_COLUMNS = "id, hostname, pid, queues, concurrency, started_at, last_seen_at, caps"
BACKFILL_COLUMNS = (
    "run_id, name, checksum, environment, status, app_version, rows_processed, rows_total, "
    "cursor, job_id, started_at, finished_at, error"
)
OUTBOX_COLUMNS = "id, staged_at, request, claimed_by, claim_expires_at, published_at, job_id"


def dumps(value: Any) -> str | None:
    """JSON text for a nullable JSON column; Python None is SQL NULL."""
    return None if value is None else json.dumps(value, separators=(",", ":"))


def error_text(error: ErrorPayload | None) -> str | None:
    """A job's structured error as its TEXT column holds it (JobRecord decodes it back)."""
    return None if error is None else error.model_dump_json()


def loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def job_state(value: str) -> JobState:
    for state in JOB_STATES:
        if value == state:
            return state
    raise JobRowStatusUnknownError("mcp_jobs_jobs", "state", value, JOB_STATES)


def step_status(value: str) -> StepStatus:
    for status in STEP_STATUSES:
        if value == status:
            return status
    raise JobRowStatusUnknownError("mcp_jobs_steps", "status", value, STEP_STATUSES)


def backfill_status(value: str) -> BackfillStatus:
    for status in BACKFILL_STATUSES:
        if value == status:
            return status
    raise JobRowStatusUnknownError("mcp_jobs_backfills", "status", value, BACKFILL_STATUSES)


def job_from_row(row: Sequence[Any]) -> JobRecord:
    values = dict(zip(JOB_COLUMNS, row, strict=True))
    values["state"] = job_state(values["state"])
    try:
        values["input"] = json.loads(values["input"])
        values["output"] = loads(values["output"])
        values["cancel_requested"] = bool(values["cancel_requested"])
        return JobRecord.model_validate(values)
    except UNDECODABLE as exc:
        raise UndecodableRow(str(values["id"]), exc) from exc


def step_from_row(row: Sequence[Any]) -> StepRecord:
    job_id, run_id, name, status, output, error, started_at, finished_at, attempts = row
    try:
        return StepRecord(
            job_id=job_id,
            run_id=run_id,
            name=name,
            status=step_status(status),
            output=loads(output),
            error=error,
            started_at=started_at,
            finished_at=finished_at,
            attempts=attempts,
        )
    except UNDECODABLE as exc:
        raise UndecodableRow(str(job_id), exc, "step", str(name)) from exc


def step_params(step: StepRecord) -> dict[str, Any]:
    return {
        "job_id": step.job_id,
        "run_id": step.run_id,
        "name": step.name,
        "status": step.status,
        "output": dumps(step.output),
        "error": step.error,
        "started_at": step.started_at,
        "finished_at": step.finished_at,
        "attempts": step.attempts,
    }


def event_from_row(row: Sequence[Any]) -> EventRecord:
    job_id, at, kind, actor, tenant_id, data = row
    try:
        return EventRecord(
            job_id=job_id, at=at, kind=kind, actor=actor, tenant_id=tenant_id, data=loads(data)
        )
    except UNDECODABLE as exc:
        raise UndecodableRow(str(job_id), exc, "event", f"{kind} at {at}") from exc


def event_params(event: EventRecord) -> dict[str, Any]:
    return {
        "job_id": event.job_id,
        "at": event.at,
        "kind": event.kind,
        "actor": event.actor,
        "tenant_id": event.tenant_id,
        "data": dumps(event.data),
    }


def worker_from_row(row: Sequence[Any]) -> WorkerInfo:
    worker_id, hostname, pid, queues, concurrency, started_at, last_seen_at, caps = row
    return WorkerInfo(
        id=worker_id,
        hostname=hostname,
        pid=pid,
        queues=loads(queues),
        concurrency=concurrency,
        started_at=started_at,
        last_seen_at=last_seen_at,
        caps=stored_caps(caps, worker_id),
    )


def worker_params(info: WorkerInfo) -> dict[str, Any]:
    return {**info.model_dump(), "queues": dumps(info.queues), "caps": dumps(info.caps)}


def backfill_from_row(row: Sequence[Any]) -> BackfillRun:
    (
        run_id,
        name,
        checksum,
        environment,
        status,
        app_version,
        rows_processed,
        rows_total,
        cursor,
        job_id,
        started_at,
        finished_at,
        error,
    ) = row
    try:
        loaded = loads(cursor)
    except UNDECODABLE as exc:
        raise UndecodableRow("", exc, "backfill", run_id=run_id) from exc
    return BackfillRun(
        run_id=run_id,
        name=name,
        checksum=checksum,
        environment=environment,
        status=backfill_status(status),
        app_version=app_version,
        rows_processed=rows_processed,
        rows_total=rows_total,
        cursor=loaded,
        job_id=job_id,
        started_at=started_at,
        finished_at=finished_at,
        error=error,
    )


def backfill_params(run: BackfillRun) -> dict[str, Any]:
    return {**run.model_dump(), "cursor": dumps(run.cursor)}


def outbox_from_row(row: Sequence[Any]) -> OutboxRow:
    row_id, staged_at, request, claimed_by, claim_expires_at, published_at, job_id = row
    return OutboxRow(
        id=row_id,
        staged_at=staged_at,
        request=EnqueueRequest.from_json(request),
        claimed_by=claimed_by,
        claim_expires_at=claim_expires_at,
        published_at=published_at,
        job_id=job_id,
    )
