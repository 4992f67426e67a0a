"""What a cron task looks like from outside: schedule, next occurrences, last fired, whether a
live worker schedules it and how many occurrences it is behind, why it is failing when its rounds
do not fire, and which of its jobs died.

Tasks are those declared under `jobs.registry` and those only a worker published
(engine/tasks/roster.py), so a process without the app's code describes them too.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterable, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, TypeVar

from pydantic import BaseModel, ConfigDict

from engine import bounds
from engine.tasks.declare import CatchUp, TaskDefinition
from engine.tasks.errors import TaskUnknownError
from engine.tasks.occurrences import Schedule
from engine.tasks.published import DESCRIPTION_CHARS, cut
from engine.tasks.roster import KnownTask, TaskSource, declared, task_roster
from engine.tasks.runs import TaskDeadRuns, dead_runs
from engine.tasks.scheduler import DEFAULT_LEASE_MS, stepped_back
from schemas.scheduler import TaskFailure, TaskState

if TYPE_CHECKING:
    from engine.client import Jobs

DEFAULT_NEXT = 5
MAX_NEXT = 100  # occurrences one describe may list
# A due occurrence fires at the next round of the scheduler leading its task (every 10 s), or
# once a peer takes over an expired lease (30 s): one still unfired after this was missed.
FIRING_GRACE_MS = 2 * DEFAULT_LEASE_MS
# Missed occurrences are counted up to this many (a long outage is "at least 10"): each costs
# a step of croniter.
MISSED_COUNTED = 10

T = TypeVar("T")


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
    # When it fires next, if a scheduler leads it (`scheduled`); not a promise otherwise.
    next_occurrences: list[TaskOccurrence]
    last_fired: TaskOccurrence | None
    # Set while the task's rounds fail (it names a job that is gone, its function raises or
    # returns no list): the next occurrences are when it is tried again, not when it fires.
    failing: TaskFailure | None = None
    # Declared here (`registry`), or known only because a worker published it.
    source: TaskSource = "registry"
    # Whether a live worker declares it, so a scheduler fires it (None: the store cannot tell).
    scheduled: bool | None = None
    # Occurrences due since the last fired one that have not fired (up to MISSED_COUNTED).
    missed: int = 0
    # Its jobs that died, among the newest dead jobs.
    dead_runs: TaskDeadRuns | None = None


async def describe_tasks(
    jobs: Jobs, name: str | None = None, *, count: int = DEFAULT_NEXT
) -> list[TaskDescriptor]:
    """Descriptors of the tasks `jobs` knows of (one when `name` is given; TASK_UNKNOWN when it
    names none), with the next `count` occurrences from now."""
    bounds.whole("count", count, 0, MAX_NEXT)
    roster = await task_roster(jobs)
    if name is not None:
        named = [t for t in roster if t.name == name]
        if not named:
            raise TaskUnknownError(name, [t.name for t in roster])
        roster = named
    return await describe_known(jobs, roster, count=count)


async def describe_known(
    jobs: Jobs,
    tasks: Sequence[KnownTask],
    *,
    count: int = DEFAULT_NEXT,
    tenant_id: str | None = None,
    listed: bool = False,
) -> list[TaskDescriptor]:
    """Descriptors of `tasks`: their states read at once, their dead jobs from one read of the
    newest dead ones (`tenant_id`'s only, when given). `listed`: one of many in an answer, so
    its description is cut and its failure carries no stored details (a traceback)."""
    if not tasks:
        return []
    states = await _all(jobs.driver.task_state(t.name) for t in tasks)
    last = {
        t.name: s.last_fired_at if s is not None else None
        for t, s in zip(tasks, states, strict=True)
    }
    dead = await dead_runs(jobs, last, tenant_id)
    now = jobs.clock.now_ms()
    described = []
    for task, state in zip(tasks, states, strict=True):
        one = _descriptor(task, now, state, count, dead.get(task.name))
        if listed:
            one = _brief(one)
        described.append(one)
    return described


def describe_task(
    definition: TaskDefinition,
    now_ms: int,
    last_fired_ms: int | None,
    count: int = DEFAULT_NEXT,
    failing: TaskFailure | None = None,
) -> TaskDescriptor:
    state = TaskState(
        task=definition.name, last_fired_at=last_fired_ms, updated_at=now_ms, failure=failing
    )
    return _descriptor(declared(definition), now_ms, state, count, None)


def missed(task: KnownTask, last_fired_ms: int | None, now_ms: int) -> int:
    """The occurrences of `task` due after its last fired one, FIRING_GRACE_MS or more ago
    (up to MISSED_COUNTED); none when it never fired, or its last lies ahead of a clock stepped
    back (the scheduler then fires on from now)."""
    if last_fired_ms is None or stepped_back(last_fired_ms, now_ms):
        return 0
    until = now_ms - FIRING_GRACE_MS
    first = _first_after(task.schedule, last_fired_ms)
    if first is None or first > until:
        return 0  # the task on time: the common case, answered from the cache
    return len(task.schedule.between(last_fired_ms, until, MISSED_COUNTED))


@lru_cache(maxsize=8192)
def _first_after(schedule: Schedule, last_fired_ms: int) -> int | None:
    # A walk of croniter costs milliseconds, and a diagnosis asks this of every task; a task's
    # last fired occurrence changes only when it fires.
    return next(iter(schedule.after(last_fired_ms)), None)


def _descriptor(
    task: KnownTask,
    now_ms: int,
    state: TaskState | None,
    count: int,
    dead: TaskDeadRuns | None,
) -> TaskDescriptor:
    schedule = task.schedule
    last_fired_ms = state.last_fired_at if state is not None else None
    # An occurrence at or before the last fired one does not fire again, unless the clock was
    # stepped back far behind it (then the scheduler fires on from now): as the scheduler does.
    start = now_ms
    if last_fired_ms is not None and not stepped_back(last_fired_ms, now_ms):
        start = max(now_ms, last_fired_ms)

    def occurrence(at: int) -> TaskOccurrence:
        return TaskOccurrence(at=at, local=schedule.local_iso(at))

    return TaskDescriptor(
        name=task.name,
        description=task.description,
        cron=task.cron,
        timezone=task.tz,
        catch_up=task.catch_up,
        max_catch_up=task.max_catch_up,
        interval=schedule.interval,
        next_occurrences=[occurrence(at) for at in schedule.next(start, count)],
        last_fired=occurrence(last_fired_ms) if last_fired_ms is not None else None,
        failing=state.failure if state is not None else None,
        source=task.source,
        scheduled=task.scheduled,
        missed=missed(task, last_fired_ms, now_ms),
        dead_runs=dead,
    )


def _brief(described: TaskDescriptor) -> TaskDescriptor:
    failing = described.failing
    if failing is not None and failing.error.details is not None:
        error = failing.error.model_copy(update={"details": None})
        failing = failing.model_copy(update={"error": error})
    return described.model_copy(
        update={"description": cut(described.description, DESCRIPTION_CHARS), "failing": failing}
    )


async def _all(reads: Iterable[Awaitable[T]]) -> list[T]:
    """The results of `reads`, run at once; the first failure raised once all have ended (none
    is left running behind it)."""
    outcomes = await asyncio.gather(*reads, return_exceptions=True)
    for outcome in outcomes:
        if isinstance(outcome, BaseException):
            raise outcome
    return list(outcomes)  # type: ignore[arg-type]
