"""Stored rows → `schemas` models. Every status column is narrowed against its runtime list.

A row crosses a process boundary: it was written by whatever build was deployed when it was
written, which on a rolling deploy is not this one. An unknown status is refused with
`JOB_ROW_STATUS_UNKNOWN`, never cast (rule 5). jsonb arrives as text and is parsed here.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from asyncpg import Record
from pydantic_core import PydanticSerializationError, from_json, to_json

from engine.drivers.damage import UNDECODABLE, UndecodableRow, stored_caps, stored_failure
from engine.errors import JobRowStatusUnknownError
from schemas.backfill import BackfillRun
from schemas.events import EventRecord
from schemas.jobs import EnqueueRequest, JobRecord, decode_last_error, decode_progress
from schemas.outbox import OutboxRow
from schemas.scheduler import TaskState
from schemas.states import (
    BACKFILL_STATUSES,
    JOB_STATES,
    STEP_STATUSES,
    BackfillStatus,
    JobState,
    StepStatus,
)
from schemas.stats import QueueStats, WorkerInfo
from schemas.steps import StepRecord
from schemas.trusted import trusted_constructor

if TYPE_CHECKING:
    from engine.drivers.postgres.connections import Connections

Row = Record
S = TypeVar("S", bound=str)


def _status(value: str, known: Sequence[S], table: str, column: str) -> S:
    # The list decides, and the match is returned typed: no cast anywhere.
    for status in known:
        if status == value:
            return status
    raise JobRowStatusUnknownError(table, column, value, known)


def job_state(value: str) -> JobState:
    return _status(value, JOB_STATES, "jobs", "state")


def step_status(value: str) -> StepStatus:
    return _status(value, STEP_STATUSES, "steps", "status")


def backfill_status(value: str) -> BackfillStatus:
    return _status(value, BACKFILL_STATUSES, "backfills", "status")


def json_text(value: Any) -> str:
    """JSON text for the server: a request's parts (inputs the client already dumped in JSON
    mode, ids, keys, numbers), an ack's or a step's write (outputs already round-tripped through
    JSON). pydantic-core writes it in a fraction of `json.dumps`' time, which every enqueue and
    every settle pays once per job. Anything it declines (a lone surrogate) goes the standard
    way, for the server to judge as before."""
    try:
        return to_json(value).decode()
    except PydanticSerializationError:
        return json.dumps(value)


def dump(value: Any) -> str | None:
    """A JSON parameter for a jsonb column; None stays SQL NULL."""
    return None if value is None else json_text(value)


def load(value: str | None) -> Any:
    """jsonb text → Python. pydantic-core parses it in a quarter of `json.loads`' time (every
    claimed job pays this); the server wrote the text, so the fallback is never expected."""
    if value is None:
        return None
    try:
        return from_json(value)
    except ValueError:
        return json.loads(value)


_JOB_FIELDS = tuple(JobRecord.model_fields)
_trusted_job = trusted_constructor(JobRecord)


def job(row: Row) -> JobRecord:
    """The record of a row of our jobs table, built without validating its columns again: the
    schema holds their types (schemas.trusted). Its status is still narrowed (rule 5) and its
    JSON text decoded, by the record's own decoders. A column the query adds beyond the
    record's (the claim's lease token) is ignored; a row missing one is validated instead."""
    try:
        fields = {name: row[name] for name in _JOB_FIELDS}
    except KeyError:
        return validated_job(row)
    fields["state"] = job_state(fields["state"])
    try:
        fields["input"] = load(fields["input"])
        fields["output"] = load(fields["output"])
        if fields["last_error"] is not None:
            fields["last_error"] = decode_last_error(fields["last_error"], fields["id"])
        if fields["progress"] is not None:
            fields["progress"] = decode_progress(fields["progress"])
        return _trusted_job(fields)
    except UNDECODABLE as exc:  # a value written by hand: jsonb takes any JSON, of any shape
        raise UndecodableRow(str(fields["id"]), exc) from exc


def record(row: Row, db: Connections) -> JobRecord:
    """`job`, with a row that cannot be read raised as the driver's STORE_DAMAGED."""
    try:
        return job(row)
    except UndecodableRow as exc:
        raise db.damaged(exc) from exc


def validated_job(row: Row) -> JobRecord:
    """`job` by validating every column (a row that lacks some of the record's columns gets
    their defaults, or is refused for a required one)."""
    fields = dict(row)
    fields["input"] = load(fields["input"])
    fields["output"] = load(fields["output"])
    fields["state"] = job_state(fields["state"])
    return JobRecord.model_validate(fields)


def step(row: Row) -> StepRecord:
    return StepRecord(
        job_id=row["job_id"],
        run_id=row["run_id"],
        name=row["name"],
        status=step_status(row["status"]),
        output=load(row["output"]),
        error=row["error"],
        started_at=row["started_at"],
        finished_at=row["finished_at"],
        attempts=row["attempts"],
    )


def event(row: Row) -> EventRecord:
    try:
        return EventRecord(
            job_id=row["job_id"],
            at=row["at"],
            kind=row["kind"],
            actor=row["actor"],
            tenant_id=row["tenant_id"],
            data=load(row["data"]),
        )
    except UNDECODABLE as exc:  # data written by hand: jsonb takes any JSON, not only objects
        name = f"{row['kind']} at {row['at']}"
        raise UndecodableRow(str(row["job_id"]), exc, "event", name) from exc


_STAT_FIELDS = (
    "ready",
    "delayed",
    "running",
    "suspended",
    "dead",
    "failed",
    "done",
    "cancelled",
    "settled_window_ms",
    "oldest_ready_ms",
    "expired_leases",
    "due_suspended",
    "oldest_due_suspended_ms",
)


def queue_stats(row: Row) -> QueueStats:
    for state in row["states"]:
        job_state(state)  # a row in a state this build cannot bucket is refused, not dropped
    return QueueStats(queue=row["queue"], **{f: int(row[f]) for f in _STAT_FIELDS})


def worker(row: Row) -> WorkerInfo:
    queues = row["queues"]
    return WorkerInfo(
        id=row["id"],
        hostname=row["hostname"],
        pid=row["pid"],
        queues=list(queues) if queues is not None else None,
        concurrency=row["concurrency"],
        started_at=row["started_at"],
        last_seen_at=row["last_seen_at"],
        caps=stored_caps(row["caps"], row["id"]),
    )


def backfill(row: Row) -> BackfillRun:
    return BackfillRun(
        run_id=row["run_id"],
        name=row["name"],
        checksum=row["checksum"],
        environment=row["environment"],
        status=backfill_status(row["status"]),
        app_version=row["app_version"],
        rows_processed=row["rows_processed"],
        rows_total=row["rows_total"],
        cursor=load(row["cursor"]),
        job_id=row["job_id"],
        started_at=row["started_at"],
        finished_at=row["finished_at"],
        error=row["error"],
    )


def task(row: Row) -> TaskState:
    return TaskState(
        task=row["task"],
        last_fired_at=row["last_fired_at"],
        updated_at=row["updated_at"],
        failure=stored_failure(row["failure"], row["task"]),
    )


def outbox(row: Row) -> OutboxRow:
    return OutboxRow(
        id=row["id"],
        staged_at=row["staged_at"],
        request=EnqueueRequest.from_json(row["request"]),
        claimed_by=row["claimed_by"],
        claim_expires_at=row["claim_expires_at"],
        published_at=row["published_at"],
        job_id=row["job_id"],
    )
