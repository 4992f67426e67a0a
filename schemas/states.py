"""The runtime status vocabularies. Types derive from these lists; decoders narrow against them.

A stored row whose status is not in its list is refused (`JOB_ROW_STATUS_UNKNOWN`), never cast:
a laundered status once made a completed step look unfinished, and it ran a second time.
"""

from __future__ import annotations

from typing import Literal, get_args

JobState = Literal[
    "ready", "delayed", "running", "suspended", "done", "failed", "dead", "cancelled"
]
StepStatus = Literal["completed", "sleeping", "failed", "waiting"]
BackfillStatus = Literal["running", "completed", "failed"]

JOB_STATES: tuple[JobState, ...] = get_args(JobState)
STEP_STATUSES: tuple[StepStatus, ...] = get_args(StepStatus)
BACKFILL_STATUSES: tuple[BackfillStatus, ...] = get_args(BackfillStatus)

# A live row holds its idempotency key; a settled one does not (rule 3).
LIVE_STATES: tuple[JobState, ...] = ("ready", "delayed", "running", "suspended")
# Never claimed again and never resurrected by accident.
SETTLED_STATES: tuple[JobState, ...] = ("done", "failed", "dead", "cancelled")
# What an operator may requeue with a plain retry. Cancelled needs an explicit opt-in (rule 11).
RETRYABLE_STATES: tuple[JobState, ...] = ("failed", "dead")
# A live job a retry runs now: one waiting for its run_at, or for its next attempt's backoff.
RUN_NOW_STATES: tuple[JobState, ...] = ("delayed",)
# What a bulk retry or cancel may select. Delayed only when named in a retry: it runs the job
# now (rules.can_retry), which no default should do.
RetryState = Literal["failed", "dead", "cancelled", "delayed"]
CancelState = Literal["ready", "delayed", "running", "suspended"]


def is_job_state(value: str) -> bool:
    return value in JOB_STATES


def is_step_status(value: str) -> bool:
    return value in STEP_STATUSES


def is_backfill_status(value: str) -> bool:
    return value in BACKFILL_STATUSES
