"""mcp-jobs engine: durable jobs, steps, retries, leases and limits over one driver Protocol."""

import importlib
from typing import TYPE_CHECKING, Any

from engine.client import Enqueue, Jobs, connect
from engine.clock import Clock, ManualClock, SystemClock
from engine.context import JobContext
from engine.declare import JobDefinition, JobRegistry, default_registry, job
from engine.environment import uses_environment
from engine.errors import JobsError
from engine.inbound_events import EventOutcome, EventSent
from engine.limits import Limits
from engine.logs import configure_logging
from engine.observe import WorkerEvent
from engine.outbox import OutboxRelay
from engine.rate_limits import RateLimit
from engine.retention import Retention
from engine.retry import Retry, retry_schedule
from engine.run_job import Permanent
from engine.steps import StepApi
from engine.tasks import Scheduler, TaskDefinition, describe_tasks, task
from engine.worker import Worker
from schemas.outbox import StagedJob

if TYPE_CHECKING:
    from engine.metrics import WorkerMetrics, serve_metrics

# Loaded on first use: prometheus-client and what it imports (an HTTP server, e-mail parsing)
# add ~3 MB to a worker's memory, and most workers never serve metrics.
_LAZY = {"WorkerMetrics": "engine.metrics", "serve_metrics": "engine.metrics"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'engine' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "Clock",
    "Enqueue",
    "EventOutcome",
    "EventSent",
    "JobContext",
    "JobDefinition",
    "JobRegistry",
    "Jobs",
    "JobsError",
    "Limits",
    "ManualClock",
    "OutboxRelay",
    "Permanent",
    "RateLimit",
    "Retention",
    "Retry",
    "Scheduler",
    "StagedJob",
    "StepApi",
    "SystemClock",
    "TaskDefinition",
    "Worker",
    "WorkerEvent",
    "WorkerMetrics",
    "configure_logging",
    "connect",
    "default_registry",
    "describe_tasks",
    "job",
    "retry_schedule",
    "serve_metrics",
    "task",
    "uses_environment",
]
