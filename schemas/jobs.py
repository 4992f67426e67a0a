"""Job records and the requests that create and move them. Times are epoch milliseconds."""

from __future__ import annotations

import json
import re
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationInfo, field_validator

from schemas.errors import ErrorPayload
from schemas.progress import Progress
from schemas.states import JobState

OnConflict = Literal["dedupe", "error"]


class EnqueueRequest(NamedTuple):
    """One job to insert, fully resolved by the client: key computed, input validated.

    A named tuple, not a model: the client builds one per job, a thousand per batch call, and a
    validated model cost four times as much to build. Nothing here comes from outside the
    process unchecked: the client validated every field, and a request read back from the
    outbox goes through `from_json`, which validates.
    """

    id: str
    run_id: str
    name: str
    queue: str
    idempotency_key: str
    input: dict[str, Any]
    run_at: int
    max_attempts: int
    tenant_id: str | None = None
    timeout_ms: int | None = None
    on_conflict: OnConflict = "dedupe"
    traceparent: str | None = None
    enqueued_by: str | None = None
    priority: int = 0

    def initial_state(self, now: int) -> JobState:
        """The state a new row starts in, in every driver: due now is ready, later delayed."""
        return "delayed" if self.run_at > now else "ready"

    def to_json(self) -> str:
        """As stored in an outbox row: a JSON object of the fields."""
        return json.dumps(self._asdict())

    @staticmethod
    def from_json(text: str | bytes) -> EnqueueRequest:
        """A stored request, validated (a row written by another version is checked here)."""
        return _REQUEST.validate_json(text)


_REQUEST: TypeAdapter[EnqueueRequest] = TypeAdapter(EnqueueRequest)


class EnqueueResult(NamedTuple):
    """What became of one enqueued job: its id and run, and whether an existing live job with
    the same key answered instead (`deduped`). A named tuple for the same reason as the request."""

    id: str
    run_id: str
    deduped: bool
    state: JobState


class JobRecord(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: str
    run_id: str
    name: str
    queue: str
    tenant_id: str | None
    idempotency_key: str
    input: dict[str, Any]
    state: JobState
    # The runs begun, 0 until claimed; a claim may take it one past max_attempts (a lease that
    # kept expiring), and that claim settles it dead without running the body, giving its count
    # back (a settled row shows the attempts it had).
    attempt: int = Field(ge=0)
    max_attempts: int = Field(ge=1)
    run_at: int
    # When the job last started waiting to run: enqueue (or its due time), a retry's due time.
    # A shed does not move it, so the oldest-ready age keeps growing under saturation (rule 7).
    queued_at: int
    created_at: int
    updated_at: int
    finished_at: int | None = None
    timeout_ms: int | None = None
    # Why the last attempt failed, as a structured error; cleared (NULL) once the job succeeds.
    last_error: ErrorPayload | None = None
    output: Any = None
    worker_id: str | None = None
    lease_expires_at: int | None = None
    cancel_requested: bool = False
    traceparent: str | None = None
    enqueued_by: str | None = None
    # Higher is claimed first (engine.rules.claim_rank); 0 unless declared or given at enqueue.
    priority: int = 0
    # The body's last `ctx.progress` report (engine/progress.py); None until it reports.
    progress: Progress | None = None
    # The run this one reran from a step (engine/reruns.py); None for a first run.
    rerun_of: str | None = None

    @field_validator("progress", mode="before")
    @classmethod
    def _decode_progress(cls, value: Any) -> Any:
        return decode_progress(value)

    @field_validator("last_error", mode="before")
    @classmethod
    def _decode_last_error(cls, value: Any, info: ValidationInfo) -> Any:
        return decode_last_error(value, info.data.get("id"))


def decode_progress(value: Any) -> Any:
    """SQL drivers hand the stored progress over as its JSON text."""
    return Progress.model_validate_json(value) if isinstance(value, str | bytes) else value


def decode_last_error(value: Any, job_id: str | None) -> Any:
    """SQL drivers store the error as JSON text in their `last_error` column; rows written
    before errors were structured hold a plain "CODE: cause" string."""
    if not isinstance(value, str):
        return value
    if value.startswith("{"):
        try:
            return ErrorPayload.model_validate_json(value)
        except ValueError:
            pass  # a legacy message that happens to start with a brace
    return legacy_error(value, job_id)


# A legacy stored message that starts with a registered-looking code: "JOB_TIMEOUT: ...".
_LEGACY_CODE = re.compile(r"([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+): (.*)", re.DOTALL)
# The code of a failure stored without one (the job's body raised): engine.errors.JobFailedError.
JOB_FAILED = "JOB_FAILED"


def legacy_error(text: str, job_id: str | None) -> ErrorPayload:
    """A failure stored as text by an earlier version, as a structured error."""
    found = _LEGACY_CODE.fullmatch(text)
    code, cause = (found.group(1), found.group(2)) if found else (JOB_FAILED, text)
    return ErrorPayload(
        code=code,
        title="the job failed (recorded before failures were stored structured)",
        cause=cause,
        fix=f"mcp-jobs jobs show {job_id or '<job id>'} --json",
        retryable=False,
    )


class ClaimExclusion(NamedTuple):
    """What a claim leaves alone besides pauses: the queues, job names and tenants whose cap a
    worker found full (engine/worker_caps.py). A hint, not a rule: the slots decide."""

    queues: frozenset[str] = frozenset()
    names: frozenset[str] = frozenset()
    tenants: frozenset[str] = frozenset()


class ClaimedJob(BaseModel):
    """A job handed to one worker, with the token that fences everything it writes back."""

    model_config = ConfigDict(frozen=True)

    record: JobRecord
    token: str
    lease_expires_at: int
    # False only when the driver knows the run has no stored steps (its first step then reads
    # nothing); True means "may have some", and the first step loads them.
    has_steps: bool = True


class NackOptions(BaseModel):
    """How a claimed job goes back (engine/rules.py decides the next state from these flags).

    `park` is the state (the row leaves the ready bucket: a sleep, an unknown name) and
    `counts_as_attempt` is the counter. A limiter shed sets neither flag's opposite: it burns no
    attempt and stays ready, so queue depth and oldest-ready age still see it (rule 7).
    """

    model_config = ConfigDict(frozen=True)

    delay_ms: int = 0
    # Becomes the job's `last_error` (a shed passes none); SQL drivers store its JSON text.
    error: ErrorPayload | None = None
    counts_as_attempt: bool = True
    park: bool = False
    dead_letter: bool = False
    # A terminal failure that is not an exhausted retry (e.g. a `Permanent` error): state `failed`.
    fail: bool = False
    # A run whose body had begun, handed back by a stopping worker: as a shed, but it ran steps,
    # so its history says so (a `handed_back` event); a shed or an unstarted hand-back writes none.
    handed_back: bool = False


class HeartbeatResult(BaseModel):
    model_config = ConfigDict(frozen=True)

    lease_expires_at: int
    cancel_requested: bool


class JobFilter(BaseModel):
    model_config = ConfigDict(frozen=True)

    states: tuple[JobState, ...] | None = None
    name: str | None = None
    queue: str | None = None
    tenant_id: str | None = None
    limit: int = Field(default=50, ge=1, le=1000)
    # Opaque to callers: the id the previous page ended at (ids sort by creation).
    cursor: str | None = None


class DamagedJob(BaseModel):
    """A job on a list page whose stored row the driver cannot read (STORE_DAMAGED): named in
    its place instead of failing the page, with the cause and the fix that shows the row."""

    model_config = ConfigDict(frozen=True)

    id: str
    cause: str
    fix: str


class JobPage(BaseModel):
    model_config = ConfigDict(frozen=True)

    jobs: list[JobRecord]
    next_cursor: str | None
    damaged: list[DamagedJob] = Field(default_factory=list)
