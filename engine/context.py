"""What a job body receives besides its input."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from engine.clock import Clock
from engine.drivers.base import Driver
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
