"""What a job body receives besides its input."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from engine.clock import Clock
from engine.drivers.base import Driver
from engine.progress import ProgressReporter, checked
from engine.steps import StepApi


@dataclass(frozen=True)
class JobContext:
    job_id: str
    run_id: str
    name: str
    queue: str
    tenant_id: str | None
    attempt: int
    max_attempts: int
    step: StepApi
    clock: Clock
    log: logging.LoggerAdapter[logging.Logger]
    traceparent: str | None = None
    # The executing worker's driver, for engine-owned jobs that keep durable records of their
    # own (the backfill pass writes its ledger row). App jobs have no use for it.
    driver: Driver | None = None
    # Where `progress` reports go (engine/progress.py); None outside a worker's run.
    reporter: ProgressReporter | None = field(default=None, repr=False, compare=False)

    def progress(self, done: float, total: float | None = None, message: str | None = None) -> None:
        """Report how far the body got: `done` of `total` units (None when unknown), with a short
        `message`. Cheap to call often: stored at most once a second, the last value at the end
        of the run. INVALID_ARGUMENT for a negative `done`, a `total` ≤ 0 or below `done`, or a
        message over 200 bytes."""
        if self.reporter is None:
            checked(done, total, message)
        else:
            self.reporter.report(done, total, message)
