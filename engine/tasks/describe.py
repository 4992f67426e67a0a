"""What a declared cron task looks like from outside: schedule, next occurrences, last fired,
and why it is failing when its rounds do not fire."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict

from engine import bounds
from engine.tasks.declare import CatchUp, TaskDefinition, tasks_of
from engine.tasks.scheduler import stepped_back
from schemas.scheduler import TaskFailure

if TYPE_CHECKING:
    from engine.client import Jobs

DEFAULT_NEXT = 5
MAX_NEXT = 100  # occurrences one describe may list


class TaskOccurrence(BaseModel):
    """One occurrence: the instant (epoch ms) and the wall time in the task's zone."""

    model_config = ConfigDict(frozen=True)

    at: int
    local: str


class TaskDescriptor(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    description: str | None
    cron: str
    timezone: str
    catch_up: CatchUp
    max_catch_up: int
    # Fixed-time tasks fire once on a repeated wall time; interval tasks (a `*` minute or hour
    # field) fire on both passes. See engine/tasks/occurrences.py.
    interval: bool
    next_occurrences: list[TaskOccurrence]
    last_fired: TaskOccurrence | None
    # Set while the task's rounds fail (it names a job that is gone, its function raises or
    # returns no list): the next occurrences are when it is tried again, not when it fires.
    failing: TaskFailure | None = None


async def describe_tasks(
    jobs: Jobs, name: str | None = None, *, count: int = DEFAULT_NEXT
) -> list[TaskDescriptor]:
    """Descriptors of the tasks declared under `jobs.registry` (one when `name` is given;
    TASK_UNKNOWN when it names none), with the next `count` occurrences from now."""
    bounds.whole("count", count, 0, MAX_NEXT)
    registry = tasks_of(jobs.registry)
    definitions = [registry.require(name)] if name is not None else list(registry)
    now = jobs.clock.now_ms()
    described: list[TaskDescriptor] = []
    for definition in definitions:
        state = await jobs.driver.task_state(definition.name)
        last = state.last_fired_at if state is not None else None
        failing = state.failure if state is not None else None
        described.append(describe_task(definition, now, last, count, failing))
    return described


def describe_task(
    definition: TaskDefinition,
    now_ms: int,
    last_fired_ms: int | None,
    count: int = DEFAULT_NEXT,
    failing: TaskFailure | None = None,
) -> TaskDescriptor:
    schedule = definition.schedule
    # An occurrence at or before the last fired one does not fire again, unless the clock was
    # stepped back far behind it (then the scheduler fires on from now): as the scheduler does.
    start = now_ms
    if last_fired_ms is not None and not stepped_back(last_fired_ms, now_ms):
        start = max(now_ms, last_fired_ms)

    def occurrence(at: int) -> TaskOccurrence:
        return TaskOccurrence(at=at, local=schedule.local_iso(at))

    return TaskDescriptor(
        name=definition.name,
        description=definition.description,
        cron=definition.cron,
        timezone=definition.tz,
        catch_up=definition.catch_up,
        max_catch_up=definition.max_catch_up,
        interval=schedule.interval,
        next_occurrences=[occurrence(at) for at in schedule.next(start, count)],
        last_fired=occurrence(last_fired_ms) if last_fired_ms is not None else None,
        failing=failing,
    )
