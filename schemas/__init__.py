"""Pydantic models and status vocabularies shared by the engine and the server. No I/O."""

from schemas.backfill import BackfillPlan, BackfillRun, BackfillStart, BackfillState
from schemas.descriptor import Backoff, JobDescriptor, RetryPolicyInfo
from schemas.errors import ErrorPayload, NextCall, RetryClass
from schemas.events import EventRecord
from schemas.jobs import (
    ClaimedJob,
    EnqueueRequest,
    EnqueueResult,
    HeartbeatResult,
    JobFilter,
    JobPage,
    JobRecord,
    NackOptions,
    OnConflict,
)
from schemas.outbox import OutboxRow
from schemas.scheduler import LeaderLease, TaskState
from schemas.states import (
    BACKFILL_STATUSES,
    JOB_STATES,
    LIVE_STATES,
    RETRYABLE_STATES,
    SETTLED_STATES,
    STEP_STATUSES,
    BackfillStatus,
    JobState,
    StepStatus,
)
from schemas.stats import QueueStats, SettledCount, WorkerInfo
from schemas.steps import StepRecord
from schemas.trace import JobTrace, TracePage, TraceQuery

__all__ = [
    "BACKFILL_STATUSES",
    "JOB_STATES",
    "LIVE_STATES",
    "RETRYABLE_STATES",
    "SETTLED_STATES",
    "STEP_STATUSES",
    "BackfillPlan",
    "BackfillRun",
    "BackfillStart",
    "BackfillState",
    "BackfillStatus",
    "Backoff",
    "ClaimedJob",
    "EnqueueRequest",
    "EnqueueResult",
    "ErrorPayload",
    "EventRecord",
    "HeartbeatResult",
    "JobDescriptor",
    "JobFilter",
    "JobPage",
    "JobRecord",
    "JobState",
    "JobTrace",
    "LeaderLease",
    "NackOptions",
    "NextCall",
    "OnConflict",
    "OutboxRow",
    "QueueStats",
    "RetryClass",
    "RetryPolicyInfo",
    "SettledCount",
    "StepRecord",
    "StepStatus",
    "TaskState",
    "TracePage",
    "TraceQuery",
    "WorkerInfo",
]
