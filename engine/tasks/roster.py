"""The cron tasks a process knows of: those declared under its registry, and those only a worker
published (engine/tasks/published.py), each with whether a live worker declares it — and so
whether any scheduler will fire it."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from engine.tasks.cron_syntax import CronSyntaxError
from engine.tasks.declare import CATCH_UP_POLICIES, CatchUp, TaskDefinition, tasks_of
from engine.tasks.occurrences import Schedule
from engine.tasks.published import SeenTask, read_back
from engine.tasks.zones import zone_ids

if TYPE_CHECKING:
    from engine.client import Jobs

TaskSource = Literal["registry", "published"]


@dataclass(frozen=True)
class KnownTask:
    """A cron task as this process knows it: declared here (`registry`), or only published."""

    name: str
    cron: str
    tz: str
    catch_up: CatchUp
    max_catch_up: int
    description: str | None
    module: str  # the module declaring it: what must change when its declaration is wrong
    schedule: Schedule
    source: TaskSource
    # A live worker running a scheduler declares it (published it within the live window), so
    # it fires; None where the store keeps no published descriptors to tell by.
    scheduled: bool | None
    # The `--app` modules of the worker that last published it: what a worker line names.
    apps: tuple[str, ...] = ()
    # Published only by workers gone, and the live workers of its app publish it no more.
    retired: bool = False
    # A live worker declares it, whether or not one runs a scheduler.
    declared_live: bool = False


def declared(definition: TaskDefinition, seen: dict[str, SeenTask] | None = None) -> KnownTask:
    """`definition` as known here; `seen`: the tasks the workers published (None: unknown)."""
    found = None if seen is None else seen.get(definition.name)
    return KnownTask(
        name=definition.name,
        cron=definition.cron,
        tz=definition.tz,
        catch_up=definition.catch_up,
        max_catch_up=definition.max_catch_up,
        description=definition.description,
        module=definition.declared_by.partition(":")[0],
        schedule=definition.schedule,
        source="registry",
        scheduled=None if seen is None else found is not None and found.scheduled,
        declared_live=found is not None and found.live,
        apps=found.apps if found is not None else (),
    )


async def task_roster(jobs: Jobs) -> list[KnownTask]:
    """Every task `jobs` knows of, by name: one read of the published descriptors."""
    store = jobs.descriptors
    seen: dict[str, SeenTask] | None = None
    if store is not None:
        seen = read_back(await store.published_descriptors(), jobs.clock.now_ms())
    known = {d.name: declared(d, seen) for d in tasks_of(jobs.registry)}
    for name, found in (seen or {}).items():
        if name not in known:
            published = _published(found)
            if published is not None:
                known[name] = published
    return [known[name] for name in sorted(known)]


def _published(seen: SeenTask) -> KnownTask | None:
    """A task only published; None when its row cannot be scheduled here (another program
    wrote it, or a zone this machine's tz database lacks)."""
    task = seen.task
    schedule = _schedule(task.cron, task.timezone, task.name)
    if schedule is None or task.catch_up not in CATCH_UP_POLICIES:
        return None
    catch_up: CatchUp = "all" if task.catch_up == "all" else "skip"
    return KnownTask(
        name=task.name,
        cron=task.cron,
        tz=task.timezone,
        catch_up=catch_up,
        max_catch_up=task.max_catch_up,
        description=task.description,
        module=task.module,
        schedule=schedule,
        source="published",
        scheduled=seen.scheduled,
        declared_live=seen.live,
        apps=seen.apps,
        retired=seen.retired,
    )


@lru_cache(maxsize=4096)
def _schedule(cron: str, tz: str, name: str) -> Schedule | None:
    # Cached: a diagnosis reads every published task, and parsing a cron costs a croniter walk.
    if tz not in zone_ids():
        return None
    try:
        return Schedule(cron, ZoneInfo(tz), hash_id=name)
    except (CronSyntaxError, ZoneInfoNotFoundError, ValueError, OSError):
        return None


__all__ = ["KnownTask", "TaskSource", "declared", "task_roster"]
