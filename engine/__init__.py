"""mcp-jobs engine: durable jobs, steps, retries, leases and limits over one driver Protocol."""

from engine.client import Enqueue, Jobs, connect
from engine.clock import Clock, ManualClock, SystemClock
from engine.context import JobContext
from engine.declare import JobDefinition, JobRegistry, default_registry, job
from engine.errors import JobsError
from engine.execute import Permanent
from engine.limits import Limits
from engine.observe import WorkerEvent
from engine.retry import Retry, retry_schedule
from engine.steps import StepApi
from engine.worker import Worker

__all__ = [
    "Clock",
    "Enqueue",
    "JobContext",
    "JobDefinition",
    "JobRegistry",
    "Jobs",
    "JobsError",
    "Limits",
    "ManualClock",
    "Permanent",
    "Retry",
    "StepApi",
    "SystemClock",
    "Worker",
    "WorkerEvent",
    "connect",
    "default_registry",
    "job",
    "retry_schedule",
]
