"""Worker state changes as values: the one feed that logs, metrics and tests all read."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Literal

from engine.logs import BARE_MESSAGE, printable
from schemas.jobs import JobRecord

WorkerEventKind = Literal[
    "claimed",
    "succeeded",
    "retried",
    "dead",
    "failed",
    "shed",
    "parked",
    "cancelled",
    "lease_lost",
    "handed_back",
]

# Why a job was parked: a `step.sleep`, or a name no job on this worker is registered under.
ParkReason = Literal["sleep", "unknown_name", "event"]
# Which cap a shed job was over (engine.limits): all jobs, its queue, its tenant, its job name.
# "rate": over a rate limit (engine.rate_limits), not a concurrency cap.
CapKind = Literal["global", "queue", "tenant", "job", "rate"]

logger = logging.getLogger("mcp_jobs.worker")

_LEVELS: dict[str, int] = {
    "claimed": logging.DEBUG,
    "succeeded": logging.DEBUG,
    # A cap sheds the same backlog many times a second: counted in metrics, not a line each.
    "shed": logging.DEBUG,
    "parked": logging.INFO,
    "handed_back": logging.INFO,
    "cancelled": logging.INFO,
    "retried": logging.WARNING,
    "lease_lost": logging.WARNING,
    # A body's `Permanent` is WARNING (`log_listener`): WARNING is on whenever ERROR is, so
    # `log_wants` never leaves one unbuilt that would be logged.
    "failed": logging.ERROR,
    "dead": logging.ERROR,
}


@dataclass(frozen=True)
class WorkerEvent:
    kind: WorkerEventKind
    job_id: str
    name: str
    queue: str
    tenant_id: str | None
    attempt: int
    at: int
    worker_id: str
    duration_ms: int | None = None
    # Words for a reader (logs); code never branches on them: it reads the fields below.
    reason: str | None = None
    # The stored error as one line, "CODE: cause", and its code.
    error: str | None = None
    error_code: str | None = None
    cap_kind: CapKind | None = None
    park_reason: ParkReason | None = None
    traceparent: str | None = None
    # A shed over a rate limit ("rate" cap_kind): the kind of the key that held it back.
    rate_kind: Literal["job", "queue", "tenant"] | None = None
    # A start ("claimed"): the job's priority, and how long it waited since it was ready.
    priority: int | None = None
    waited_ms: int | None = None
    # A "failed" job whose body raised `engine.Permanent`: the app's verdict on its input, an
    # expected outcome like a retry to come, so its line is a WARNING (`log_listener`).
    permanent: bool | None = None
    # A failure of the body ("retried", "failed", "dead"): the exception it raised, for the log
    # line's traceback. Not one of `fields()`: it is not a value to copy or compare.
    exc: BaseException | None = field(default=None, repr=False, compare=False)

    @classmethod
    def of(
        cls,
        kind: WorkerEventKind,
        record: JobRecord,
        *,
        at: int,
        worker_id: str,
        duration_ms: int | None = None,
        reason: str | None = None,
        error: str | None = None,
        error_code: str | None = None,
        cap_kind: CapKind | None = None,
        park_reason: ParkReason | None = None,
        permanent: bool | None = None,
        exc: BaseException | None = None,
    ) -> WorkerEvent:
        return cls(
            kind=kind,
            job_id=record.id,
            name=record.name,
            queue=record.queue,
            tenant_id=record.tenant_id,
            attempt=record.attempt,
            at=at,
            worker_id=worker_id,
            duration_ms=duration_ms,
            reason=reason,
            error=error,
            error_code=error_code,
            cap_kind=cap_kind,
            park_reason=park_reason,
            traceparent=record.traceparent,
            priority=record.priority if kind == "claimed" else None,
            waited_ms=max(0, at - record.queued_at) if kind == "claimed" else None,
            permanent=permanent,
            exc=exc,
        )

    def fields(self) -> dict[str, object]:
        # Not asdict(): it deep-copies every value, and an exception may not survive a copy.
        return {
            f.name: value
            for f in _FIELDS
            if f.name != "exc" and (value := getattr(self, f.name)) is not None
        }


_FIELDS = fields(WorkerEvent)

WorkerEventListener = Callable[[WorkerEvent], None]


def log_wants(kind: WorkerEventKind) -> bool:
    """Whether `log_listener` would write an event of `kind` at the current log level."""
    return logger.isEnabledFor(_LEVELS.get(kind, logging.INFO))


def log_listener(event: WorkerEvent) -> None:
    """One structured record per state change: `extra={"job": {...}}` carries every field, and
    the message names the job too (`job.parked job_id=… name="…" attempt=1 …`), for an app's
    own plain format; the engine's formatters write the event's name alone beside the fields.

    A body's exception goes on the record as `exc_info` (the formatters write its traceback):
    on a failed or dead job's ERROR line always; on a WARNING line (a retried job, a body's
    `Permanent`) only at DEBUG, since its `last_error` keeps it and an expected failure is
    not a crash to dig into."""
    level = logging.WARNING if event.permanent else _LEVELS.get(event.kind, logging.INFO)
    if logger.isEnabledFor(level):
        exc = event.exc
        if exc is not None and level < logging.ERROR and not logger.isEnabledFor(logging.DEBUG):
            exc = None
        extra = {"job": event.fields(), BARE_MESSAGE: f"job.{event.kind}"}
        logger.log(level, "%s", _line(event), extra=extra, exc_info=exc)


def _line(event: WorkerEvent) -> str:
    """The event as one line of text: a name, a reason or an error code is anyone's text, so
    each is quoted and whatever is not printable escaped (no line break starts a forged line)."""
    said = [f"job.{event.kind}", f"job_id={event.job_id}", f"name={_quoted(event.name)}"]
    said.append(f"attempt={event.attempt}")
    if event.error_code is not None:
        said.append(f"error={_quoted(event.error_code)}")
    if event.reason is not None:
        said.append(f"reason={_quoted(event.reason)}")
    return " ".join(said)


def _quoted(text: str) -> str:
    return printable(json.dumps(text, ensure_ascii=False))
