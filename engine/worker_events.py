"""Where a worker's events go: to each of its listeners (engine.observe), the log first. A listener
that raises is logged and the others still hear the event; with no one to hear a kind, the event
is not even built."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from engine.clock import Clock
from engine.observe import (
    CapKind,
    WorkerEvent,
    WorkerEventKind,
    WorkerEventListener,
    log_listener,
    log_wants,
)
from schemas.jobs import JobRecord

logger = logging.getLogger("mcp_jobs.worker")


class WorkerEvents:
    """The listeners of worker `worker_id`: the log listener, then `listeners`."""

    def __init__(
        self, clock: Clock, worker_id: str, listeners: Iterable[WorkerEventListener]
    ) -> None:
        self.clock = clock
        self.worker_id = worker_id
        self.listeners: list[WorkerEventListener] = [log_listener, *listeners]

    def add(self, listener: WorkerEventListener) -> None:
        self.listeners.append(listener)

    def emit(self, event: WorkerEvent) -> None:
        for listener in self.listeners:
            try:
                listener(event)
            except Exception:
                logger.exception("worker listener failed on %s", event.kind)

    def wants(self, kind: WorkerEventKind) -> bool:
        """Whether an event of `kind` has anyone to go to: with only the log listener and its
        level off (claimed/succeeded are DEBUG), the event is not even built."""
        return len(self.listeners) > 1 or log_wants(kind)

    def about(
        self,
        kind: WorkerEventKind,
        record: JobRecord,
        reason: str,
        cap_kind: CapKind | None = None,
    ) -> None:
        """Say `kind` of `record` now, for `reason`."""
        self.emit(
            WorkerEvent.of(
                kind,
                record,
                at=self.clock.now_ms(),
                worker_id=self.worker_id,
                reason=reason,
                cap_kind=cap_kind,
            )
        )
