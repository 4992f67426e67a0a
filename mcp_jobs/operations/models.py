"""What the operations return, and the MCP tools publish as their `outputSchema`: each an
envelope of `ok`, the payload fields, and `error`.

Every payload field is optional, so a failure (`{"ok": false, "error": {...}}`) validates against
the same `outputSchema` a success does: strict clients check structured content against it even
when `isError` is true.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from engine.tasks import TaskDescriptor
from schemas.backfill import BackfillPlan, BackfillRun, BackfillStart, BackfillState
from schemas.descriptor import JobDescriptor
from schemas.errors import ErrorPayload, NextCall
from schemas.events import EventRecord
from schemas.jobs import JobRecord
from schemas.states import JobState
from schemas.stats import QueueStats
from schemas.steps import StepRecord


class Envelope(BaseModel):
    """`ok` is false exactly when `error` is set; the payload fields are then absent."""

    ok: bool = Field(description="true on success; false when `error` says what went wrong")
    error: ErrorPayload | None = Field(
        default=None,
        description="set on failure: code, cause, the one-line fix, and a next_call to issue",
    )


class JobSummary(BaseModel):
    """A job without its input and output: what a list or an operation's answer shows."""

    model_config = ConfigDict(frozen=True)

    id: str
    run_id: str
    name: str
    queue: str
    tenant_id: str | None
    state: JobState
    attempt: int
    max_attempts: int
    run_at: int
    created_at: int
    updated_at: int
    finished_at: int | None = None
    last_error: ErrorPayload | None = Field(
        default=None,
        description="why the last attempt failed: code, cause and the fix to run; cleared once "
        "the job succeeds",
    )

    @classmethod
    def of(cls, record: JobRecord) -> JobSummary:
        return cls.model_validate(record.model_dump(include=set(cls.model_fields)))


class DescribeJobsResult(Envelope):
    jobs: list[JobDescriptor] | None = None
    tasks: list[TaskDescriptor] | None = Field(
        default=None,
        description="the app's cron tasks: schedule, zone, next occurrences, last fired "
        "(all jobs only)",
    )


class EnqueueJobResult(Envelope):
    job_id: str | None = None
    run_id: str | None = None
    name: str | None = None
    tenant_id: str | None = None
    state: JobState | None = None
    deduped: bool | None = Field(
        default=None,
        description="true when a live job already held this idempotency key; job_id is that job",
    )


class ListJobsResult(Envelope):
    jobs: list[JobSummary] | None = None
    next_cursor: str | None = Field(
        default=None, description="pass as `cursor` for the next page; null on the last page"
    )


class LeaseInfo(BaseModel):
    worker_id: str | None
    expires_at: int
    expired: bool


class InspectJobResult(Envelope):
    job: JobRecord | None = None
    steps: list[StepRecord] | None = Field(
        default=None, description="the newest steps of the run (a page), in start order"
    )
    events: list[EventRecord] | None = Field(
        default=None, description="the newest events of the job (a page), oldest first"
    )
    steps_total: int | None = Field(default=None, description="every step the run has stored")
    events_total: int | None = Field(default=None, description="every event the job has stored")
    steps_cursor: str | None = Field(
        default=None, description="pass back as steps_cursor for the steps before this page"
    )
    events_cursor: str | None = Field(
        default=None, description="pass back as events_cursor for the events before this page"
    )
    lease: LeaseInfo | None = Field(default=None, description="set while a worker holds the job")
    retry_delays_ms: list[int] | None = Field(
        default=None, description="the policy's delay before attempt 2, 3, … N"
    )
    next_attempt_at: int | None = Field(
        default=None, description="epoch ms the next attempt becomes due, when one is scheduled"
    )
    registered: bool | None = Field(
        default=None, description="false when no job of this name is registered in this server"
    )


class QueueStatsResult(Envelope):
    queues: list[QueueStats] | None = None
    tenant_id: str | None = Field(
        default=None, description="set when the counts cover only this tenant's jobs"
    )
    at: int | None = None


Severity = Literal["critical", "warning", "info"]


class Finding(BaseModel):
    """One thing diagnose found, with what to do about it."""

    code: str
    severity: Severity
    queue: str | None = None
    cause: str
    fix: str
    next_call: NextCall | None = None
    job_ids: list[str] = Field(default_factory=list)
    last_error: ErrorPayload | None = Field(
        default=None,
        description="DEAD_LETTERS: how the newest dead job failed (code, cause, fix)",
    )


class DiagnoseQueueResult(Envelope):
    healthy: bool | None = None
    findings: list[Finding] | None = None
    live_workers: int | None = None
    queues: list[QueueStats] | None = None
    at: int | None = None


class RetryJobResult(Envelope):
    job: JobSummary | None = None


class CancelJobResult(Envelope):
    job: JobSummary | None = None
    stopping: bool | None = Field(
        default=None,
        description="true when the job was running: its worker stops it at the next heartbeat",
    )


class WaitForJobResult(Envelope):
    settled: bool | None = Field(
        default=None,
        description="true when the job reached done, failed, dead or cancelled within the wait",
    )
    job: JobSummary | None = None
    output: Any = Field(default=None, description="the job's return value once done")
    waited_ms: int | None = None


class RunBackfillResult(Envelope):
    mode: Literal["dry_run", "write"] | None = Field(
        default=None, description="dry_run wrote nothing; write started a durable pass"
    )
    plan: BackfillPlan | None = Field(
        default=None,
        description="dry run: rows and batches a write would sweep; blocked_by says what a "
        "write would answer instead of starting",
    )
    start: BackfillStart | None = Field(
        default=None, description="write: the pass job (follow it with wait_for_job)"
    )
    run: BackfillRun | None = Field(
        default=None,
        description="write with wait_seconds: the pass's ledger row as the wait ended",
    )
    settled: bool | None = Field(
        default=None, description="write with wait_seconds: true when the pass job finished"
    )


class ListBackfillsResult(Envelope):
    environment: str | None = None
    backfills: list[BackfillState] | None = None
    runs: list[BackfillRun] | None = Field(
        default=None,
        description="with `name`: a page of that backfill's ledger rows in this environment, "
        "newest first (every run, forced reruns included)",
    )
    runs_cursor: str | None = Field(
        default=None,
        description="with `name`: pass back as runs_cursor for the older runs; null on the "
        "last page",
    )


class DrainResult(Envelope):
    claimed: int | None = None
    outcomes: dict[str, int] | None = None
    queues: QueueStatsResult | None = None


class MigrateResult(Envelope):
    driver: str | None = None
    database: str | None = None
