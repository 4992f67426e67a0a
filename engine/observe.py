"""Worker state changes as values: the one feed that logs, metrics and tests all read."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Literal

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

logger = logging.getLogger("mcp_jobs.worker")

_LEVELS: dict[str, int] = {
    "claimed": logging.DEBUG,
    "succeeded": logging.DEBUG,
    "shed": logging.INFO,
    "parked": logging.INFO,
    "handed_back": logging.INFO,
    "cancelled": logging.INFO,
    "retried": logging.WARNING,
    "lease_lost": logging.WARNING,
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
    reason: str | None = None
    error: str | None = None
    traceparent: str | None = None

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
            traceparent=record.traceparent,
        )

    def fields(self) -> dict[str, object]:
        return {k: v for k, v in asdict(self).items() if v is not None}


Listener = Callable[[WorkerEvent], None]


def log_wants(kind: WorkerEventKind) -> bool:
    """Whether `log_listener` would write an event of `kind` at the current log level."""
    return logger.isEnabledFor(_LEVELS.get(kind, logging.INFO))


def log_listener(event: WorkerEvent) -> None:
    """One structured record per state change: `extra={"job": {...}}` carries every field."""
    level = _LEVELS.get(event.kind, logging.INFO)
    if logger.isEnabledFor(level):
        logger.log(level, "job.%s", event.kind, extra={"job": event.fields()})
