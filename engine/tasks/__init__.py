"""Cron tasks: `task(...)` declarations, their occurrences in a zone, and the scheduler."""

from engine.tasks.declare import (
    CATCH_UP_POLICIES,
    DEFAULT_MAX_CATCH_UP,
    CatchUp,
    TaskDefinition,
    TaskRegistry,
    task,
    tasks_of,
)
from engine.tasks.describe import (
    TaskDescriptor,
    TaskOccurrence,
    describe_known,
    describe_task,
    describe_tasks,
)
from engine.tasks.errors import (
    TaskCatchUpInvalidError,
    TaskCronInvalidError,
    TaskDeclarationInvalidError,
    TaskEnqueueFailedError,
    TaskEntryInvalidError,
    TaskNameTakenError,
    TaskTimezoneInvalidError,
    TaskUnknownError,
)
from engine.tasks.occurrences import Schedule
from engine.tasks.roster import KnownTask, task_roster
from engine.tasks.runs import TaskDeadRuns
from engine.tasks.scheduler import FiredOccurrence, Scheduler, SchedulerRound

__all__ = [
    "CATCH_UP_POLICIES",
    "DEFAULT_MAX_CATCH_UP",
    "CatchUp",
    "FiredOccurrence",
    "KnownTask",
    "Schedule",
    "Scheduler",
    "SchedulerRound",
    "TaskCatchUpInvalidError",
    "TaskCronInvalidError",
    "TaskDeadRuns",
    "TaskDeclarationInvalidError",
    "TaskDefinition",
    "TaskDescriptor",
    "TaskEnqueueFailedError",
    "TaskEntryInvalidError",
    "TaskNameTakenError",
    "TaskOccurrence",
    "TaskRegistry",
    "TaskTimezoneInvalidError",
    "TaskUnknownError",
    "describe_known",
    "describe_task",
    "describe_tasks",
    "task",
    "task_roster",
    "tasks_of",
]
