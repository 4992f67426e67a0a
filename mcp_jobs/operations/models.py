"""What the operations return, and the MCP tools publish as their `outputSchema`: each an
envelope of `ok`, the payload fields, and `error`.

Every payload field is optional, so a failure (`{"ok": false, "error": {...}}`) validates against
the same `outputSchema` a success does: strict clients check structured content against it even
when `isError` is true.

Times are epoch milliseconds (`*_at`, what the engine stores and a caller passes back), each with
its ISO 8601 UTC reading beside it (`*_at_iso`, "2026-12-01T13:20:00.123Z"), what an agent reads.
The records of other layers get theirs through the `…View` subclasses here.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, computed_field, field_validator

from engine.instants import iso
from engine.tasks import TaskDescriptor, TaskOccurrence
from schemas.backfill import BackfillPlan, BackfillRun, BackfillStart, BackfillState
from schemas.descriptor import JobDescriptor, PublishedTask, RetentionInfo
from schemas.errors import ErrorPayload, NextCall
from schemas.events import EventRecord
from schemas.jobs import JobRecord
from schemas.pauses import Pause
from schemas.progress import Progress
from schemas.scheduler import TaskFailure
from schemas.states import JobState
from schemas.stats import QueueStats
from schemas.steps import StepRecord

# What the answers look like, computed `*_iso` fields included, whichever mode a schema is asked in
# (the SDK asks for validation mode, which leaves computed fields out).
_ANSWER = ConfigDict(json_schema_mode_override="serialization")


class Envelope(BaseModel):
    """`ok` is false exactly when `error` is set; the payload fields are then absent, but for
    the CLI's `db report --json`, which keeps its report beside the error (scripts read
    `.reachable`)."""

    model_config = _ANSWER

    ok: bool = Field(description="true on success; false when `error` says what went wrong")
    error: ErrorPayload | None = Field(
        default=None,
        description="set on failure: code, cause, the one-line fix, and a next_call to issue",
    )


def iso_of(field: str, *, optional: bool = False) -> Any:
    """The read-only `<field>_iso` beside the epoch-ms `field`: a computed field, so it is in the
    answer and in the output schema, and absent (exclude_none) when `field` is None.

    Declared `name: ClassVar[str] = iso_of(...)`: the ClassVar keeps the pydantic mypy plugin from
    reading it as an untyped field; pydantic still finds the computed field."""

    def read(self: BaseModel) -> str | None:
        ms = getattr(self, field)
        return None if ms is None else iso(ms)

    return computed_field(return_type=str | None if optional else str)(property(read))


# The views: another layer's record with its times also in ISO, and None for each nullable field
# it requires (a success omits None fields, and the SDK validates a success against the model).
# `from_attributes` lets a field typed as the view take the record (`InspectJobResult(job=r)`).
_VIEW = ConfigDict(frozen=True, from_attributes=True, json_schema_mode_override="serialization")


class ProgressView(Progress):
    """A job's last `ctx.progress` report; `attempt` says which run it came from (a retried job
    keeps it until the new attempt reports)."""

    model_config = _VIEW

    at_iso: ClassVar[str] = iso_of("at")


class JobView(JobRecord):
    model_config = _VIEW

    tenant_id: str | None = None
    progress: ProgressView | None = None

    run_at_iso: ClassVar[str] = iso_of("run_at")
    queued_at_iso: ClassVar[str] = iso_of("queued_at")
    created_at_iso: ClassVar[str] = iso_of("created_at")
    updated_at_iso: ClassVar[str] = iso_of("updated_at")
    finished_at_iso: ClassVar[str | None] = iso_of("finished_at", optional=True)
    lease_expires_at_iso: ClassVar[str | None] = iso_of("lease_expires_at", optional=True)


# A step or event of `inspect_job` leaves out the job and run it belongs to: the answer's `job`
# says them. The defaults let the SDK validate an answer without them against the model.
class StepView(StepRecord):
    model_config = _VIEW

    job_id: str = Field(default="", exclude=True)
    run_id: str = Field(default="", exclude=True)

    started_at_iso: ClassVar[str] = iso_of("started_at")
    finished_at_iso: ClassVar[str | None] = iso_of("finished_at", optional=True)


class EventView(EventRecord):
    model_config = _VIEW

    job_id: str | None = Field(default=None, exclude=True)

    at_iso: ClassVar[str] = iso_of("at")


class BackfillRunView(BackfillRun):
    model_config = _VIEW

    app_version: str | None = None

    started_at_iso: ClassVar[str] = iso_of("started_at")
    finished_at_iso: ClassVar[str | None] = iso_of("finished_at", optional=True)


class BackfillStateView(BackfillState):
    # No override of the schema mode in a view without times of its own: pydantic (2.14) loses a
    # nested definition when both the view and its fields' views carry one.
    model_config = ConfigDict(frozen=True, from_attributes=True)

    description: str | None = None
    rate: float | None = None
    last_run: BackfillRunView | None = None
    live_job_id: str | None = None


class TaskOccurrenceView(TaskOccurrence):
    model_config = _VIEW

    at_iso: ClassVar[str] = iso_of("at")


class TaskFailureView(TaskFailure):
    model_config = _VIEW

    since_iso: ClassVar[str] = iso_of("since")
    last_failed_at_iso: ClassVar[str] = iso_of("last_failed_at")


class PauseView(Pause):
    model_config = _VIEW

    paused_at_iso: ClassVar[str | None] = iso_of("paused_at", optional=True)


class TaskView(TaskDescriptor):
    model_config = ConfigDict(frozen=True, from_attributes=True)  # as BackfillStateView

    # Narrowed to the view; a list is invariant, so mypy cannot see that this is safe here.
    next_occurrences: list[TaskOccurrenceView]  # type: ignore[assignment]
    description: str | None = None
    last_fired: TaskOccurrenceView | None = None
    failing: TaskFailureView | None = None


class JobDescriptorView(JobDescriptor):
    model_config = _VIEW

    description: str | None = None
    timeout_ms: int | None = None
    concurrency: int | None = None
    published_at_iso: ClassVar[str | None] = iso_of("published_at", optional=True)
    # What a prune goes by (prune_history shows its cutoffs), not how to call the job.
    retention: RetentionInfo | None = Field(default=None, exclude=True)
    # The cron tasks a published row carries are listed as tasks, not with the job.
    tasks: list[PublishedTask] | None = Field(default=None, exclude=True)
    # Written into fix lines as PYTHONPATH (operations/workers.py), not how to call the job.
    app_paths: list[str] | None = Field(default=None, exclude=True)


class JobSummary(BaseModel):
    """A job without its input and output: what a list or an operation's answer shows."""

    model_config = ConfigDict(frozen=True, json_schema_mode_override="serialization")

    id: str
    run_id: str
    name: str
    queue: str
    tenant_id: str | None = None
    state: JobState
    attempt: int
    max_attempts: int
    priority: int = 0
    run_at: int
    created_at: int
    updated_at: int
    finished_at: int | None = None
    last_error: ErrorPayload | None = Field(
        default=None,
        description="why the last attempt failed: code, cause and the fix to run; cleared once "
        "the job succeeds (the body's traceback: inspect_job)",
    )
    run_at_iso: ClassVar[str] = iso_of("run_at")
    created_at_iso: ClassVar[str] = iso_of("created_at")
    updated_at_iso: ClassVar[str] = iso_of("updated_at")
    finished_at_iso: ClassVar[str | None] = iso_of("finished_at", optional=True)

    @classmethod
    def of(cls, record: JobRecord) -> Self:
        # Read from the record's attributes: no dict of it is built to be validated again.
        summary = cls.model_validate(record, from_attributes=True)
        error = summary.last_error
        if error is None or not error.details or "traceback" not in error.details:
            return summary
        # Up to 4 KB a job: a page of 200 dead jobs was near a megabyte. inspect_job (the
        # error's own next_call) keeps it.
        details = {k: v for k, v in error.details.items() if k != "traceback"} or None
        return summary.model_copy(
            update={"last_error": error.model_copy(update={"details": details})}
        )


class JobProgressSummary(JobSummary):
    """A summary with the job's last progress report: what list_jobs and wait_for_job show
    (the answers of a write leave it out: it is not what they changed)."""

    progress: ProgressView | None = Field(
        default=None, description="the job's last own report of how far it got, when it made one"
    )


class DescribeJobsResult(Envelope):
    jobs: list[JobDescriptorView] | None = None
    next_cursor: str | None = Field(default=None, description="pass back as cursor")
    paused: list[PauseView] | None = Field(
        default=None,
        description="pauses holding these jobs back: their name (kind job) or their queue "
        "(kind queue) is paused, so they are enqueued but not claimed",
    )
    tasks: list[TaskView] | None = Field(
        default=None,
        description="the cron tasks on this page (declared here, or published by a worker): "
        "schedule, zone, next occurrences, last fired, whether a live worker schedules it, "
        "missed occurrences, failure, dead jobs; they page with the jobs, by name",
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
    notices: list[Finding] | None = Field(
        default=None,
        description="why this may not move: NO_LIVE_WORKERS when no live worker serves the "
        "queue, with the command that starts one; QUEUE_PAUSED / JOB_PAUSED when a pause holds "
        "the job, with the resume",
    )


class ListJobsResult(Envelope):
    jobs: list[JobProgressSummary] | None = None
    next_cursor: str | None = Field(
        default=None, description="pass as `cursor` for the next page; null on the last page"
    )
    notices: list[Finding] | None = Field(
        default=None,
        description="STORE_DAMAGED: a row of this page the store cannot read, in job_ids, with "
        "the fix that shows it; the rest of the page and the cursor go on past it. "
        "TENANT_SPELT_OTHERWISE: an empty page whose tenant_id matches stored tenants in another "
        "case; next_call lists the stored spelling",
    )


class LeaseInfo(BaseModel):
    model_config = _ANSWER

    worker_id: str | None = None
    expires_at: int
    expired: bool
    expires_at_iso: ClassVar[str] = iso_of("expires_at")


class InspectJobResult(Envelope):
    job: JobView | None = None
    steps: list[StepView] | None = Field(
        default=None, description="the newest steps of the run (a page), in start order"
    )
    events: list[EventView] | None = Field(
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
    next_attempt_at_iso: ClassVar[str | None] = iso_of("next_attempt_at", optional=True)


class RateLimitView(BaseModel):
    """A rate limit (engine.rate_limits) as stored: the rate that last took under its key, and
    when a start may next happen there if the limit holds work back now."""

    model_config = _VIEW

    key: str = Field(
        description="`job:<name>`, `job:<name>:<computed key>`, `queue:<q>` or `tenant:<t>`"
    )
    rate: str = Field(description='e.g. "50 per 1s", "10 per 60s, burst 5"')
    limit: int
    per_ms: int
    burst: int
    next_start_at: int | None = Field(
        default=None,
        description="set while the limit holds starts back: the earliest start under this key"
        " (the first reserved turn)",
    )
    next_start_at_iso: ClassVar[str | None] = iso_of("next_start_at", optional=True)
    reserved_until: int | None = Field(
        default=None,
        description="set while turns are reserved under this key: the earliest start for a job"
        " not yet reserved one",
    )
    reserved_until_iso: ClassVar[str | None] = iso_of("reserved_until", optional=True)


class QueueStatsView(QueueStats):
    model_config = _VIEW

    paused: PauseView | None = Field(
        default=None,
        description="set while the queue is paused (who, when, why): its waiting jobs are not"
        " claimed and keep counting above",
    )
    rate_limits: list[RateLimitView] | None = Field(
        default=None,
        description="rate limits of this queue and of its jobs: starts over them are shed (they"
        " stay ready above) until next_start_at",
    )


class OutboxView(BaseModel):
    """Staged outbox rows not yet published (engine/outbox.py): they are no job in any queue
    until a worker's relay publishes them."""

    model_config = _VIEW

    waiting: int
    at_least: bool = Field(description="the count stopped at its bound")
    oldest_staged_at: int
    oldest_staged_at_iso: ClassVar[str] = iso_of("oldest_staged_at")


# The counts of every queue read, those left out of `queues` included (no docstring: it would
# be published in the schema).
class QueueTotals(BaseModel):
    model_config = _VIEW

    queues: int
    ready: int
    delayed: int
    running: int
    suspended: int
    dead: int
    failed: int
    done: int
    cancelled: int


class QueueStatsResult(Envelope):
    queues: list[QueueStatsView] | None = Field(default=None, description="busiest, by name")
    queues_left_out: int | None = Field(default=None, description="counted in totals only")
    totals: QueueTotals | None = None
    paused_jobs: list[PauseView] | None = Field(
        default=None,
        description="job names paused now (in any queue): their waiting jobs are not claimed",
    )
    tenant_id: str | None = Field(
        default=None, description="set when the counts cover only this tenant's jobs"
    )
    tenant_rate_limits: list[RateLimitView] | None = Field(
        default=None, description="per-tenant rate limits (they span every queue)"
    )
    outbox: OutboxView | None = Field(
        default=None, description="staged outbox rows waiting to be published (all queues)"
    )
    at: int | None = None
    at_iso: ClassVar[str | None] = iso_of("at", optional=True)


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
        description="DEAD_LETTERS, RETRIES_WAITING: how the newest such job failed",
    )
    # How many jobs (or rows) it covers: diagnose lists the largest first. Not in the answer.
    _size: int = PrivateAttr(default=0)

    @field_validator("last_error")
    @classmethod
    def _error_only(cls, error: ErrorPayload | None) -> ErrorPayload | None:
        """The error's code, cause and fix without the job's stored details (a traceback of up
        to 4 KiB): a finding per queue would carry one each; inspect_job shows them."""
        if error is None or error.details is None:
            return error
        return error.model_copy(update={"details": None})

    def sized(self, size: int) -> Finding:
        self._size = size
        return self

    @property
    def size(self) -> int:
        return self._size


class DiagnoseQueueResult(Envelope):
    healthy: bool | None = None
    findings: list[Finding] | None = Field(
        default=None, description="most severe, then largest first; cut: MORE_FINDINGS ends it"
    )
    finding_counts: dict[str, int] | None = Field(default=None, description="all, per code")
    live_workers: int | None = None
    queues: list[QueueStatsView] | None = None
    queues_left_out: int | None = None
    at: int | None = None
    at_iso: ClassVar[str | None] = iso_of("at", optional=True)


class RetryJobResult(Envelope):
    job: JobSummary | None = None
    rerun_of: str | None = Field(
        default=None,
        description="with from_step: the run this one reran from (job.run_id is the new run)",
    )


class CancelJobResult(Envelope):
    job: JobSummary | None = None
    stopping: bool | None = Field(
        default=None,
        description="true when the job was running: its worker stops it at the next heartbeat",
    )
    already_cancelled: bool | None = Field(
        default=None,
        description="true when the job was cancelled before this call: nothing changed",
    )


class WaitForJobResult(Envelope):
    settled: bool | None = Field(
        default=None,
        description="true when the job reached done, failed, dead or cancelled within the wait",
    )
    job: JobProgressSummary | None = None
    output: Any = Field(default=None, description="the job's return value once done")
    waited_ms: int | None = None
    notices: list[Finding] | None = Field(
        default=None,
        description="why this may not move: NO_LIVE_WORKERS when no live worker serves the "
        "queue, with the command that starts one; on a timeout, QUEUE_PAUSED / JOB_PAUSED when "
        "a pause holds the job, with the resume",
    )


class ConfirmOffer(BaseModel):
    """The confirm token a dry run hands a client that cannot be asked to confirm a write
    (issued and checked by `mcp_jobs.server.confirm`)."""

    model_config = ConfigDict(json_schema_mode_override="serialization")  # with expires_at_iso

    token: str = Field(description="single use")
    expires_at: int
    expires_at_iso: ClassVar[str] = iso_of("expires_at")
    next_call: NextCall = Field(description="the write, token included")


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
    run: BackfillRunView | None = Field(
        default=None,
        description="write with wait_seconds: the pass's ledger row as the wait ended",
    )
    settled: bool | None = Field(
        default=None, description="write with wait_seconds: true when the pass job finished"
    )
    notices: list[Finding] | None = Field(
        default=None,
        description="why this may not move: NO_LIVE_WORKERS when no live worker serves the "
        "queue, with the command that starts one",
    )
    confirm: ConfirmOffer | None = Field(
        default=None,
        description="dry run, client without elicitation: the write's token",
    )

    def followed(self, run: BackfillRun | None, settled: bool) -> RunBackfillResult:
        """This write's answer with the pass's ledger row as the wait ended. Use it rather than
        `model_copy(update=...)`, which would keep `run` a bare record, without its ISO times."""
        view = None if run is None else BackfillRunView.model_validate(run, from_attributes=True)
        return self.model_copy(update={"run": view, "settled": settled})


class ListBackfillsResult(Envelope):
    environment: str | None = None
    backfills: list[BackfillStateView] | None = None
    runs: list[BackfillRunView] | None = Field(
        default=None,
        description="with `name`: a page of that backfill's ledger rows in this environment, "
        "newest first (every run, forced reruns included)",
    )
    runs_cursor: str | None = Field(
        default=None,
        description="with `name`: pass back as runs_cursor for the older runs; null on the "
        "last page",
    )
    declared: bool | None = Field(
        default=None, description="with `name`: false when no backfill of it is declared here"
    )


class DrainResult(Envelope):
    claimed: int | None = None
    outcomes: dict[str, int] | None = None
    queues: QueueStatsResult | None = None
    notices: list[Finding] | None = Field(
        default=None,
        description="DEAD_LETTERS, JOBS_FAILED: jobs this drain ran that ended dead or failed, "
        "in job_ids (the first 20), with the call that shows the first",
    )


class MigrateResult(Envelope):
    driver: str | None = None
    database: str | None = None
    # Where the schema is numbered migrations (SQLite, PostgreSQL): the versions this run
    # applied, and the schema's line as `db report` prints it.
    applied: list[int] | None = None
    schema_line: str | None = None
    # Elsewhere (a NATS bucket): the store this run installed ("bucket mcp-jobs"), if any.
    installed: str | None = None


class NatsReportResult(Envelope):
    lines: list[str] | None = None


class DbReportResult(Envelope):
    driver: str | None = None
    database: str | None = None
    reachable: bool | None = None
    lines: list[str] | None = None
