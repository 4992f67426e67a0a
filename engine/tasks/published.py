"""Cron tasks published with the job descriptors, so a process without their code (a server or
dashboard started without `--app`) can show and diagnose them.

A worker publishes its tasks inside the job descriptors it already publishes, every 20 s
(engine/descriptors.py): each task rides on one of that worker's job rows, its carrier. The
carrier is the job declared nearest the task (the longest shared module path; among equals, one
picked by the task's name), so workers of one app agree on it and a row is rewritten with the
same tasks whoever publishes it last. Two versions of an app declaring different tasks: the
last to publish a row wins, as for a job's own description.

A task read back is `live` when its row was published within the live-worker window: a live
worker declares it. It is `scheduled` when, besides, a worker running a scheduler published it
within that window (`scheduled_at`; a worker started with `scheduler=False` carries the stored
stamp forward, so it neither claims the task is fired nor hides the worker that fires it). A
task only on stale rows whose app live workers publish without it was taken out of the app
(`retired`), not left unscheduled.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from engine.declare import JobRegistry
from engine.descriptors import STALE_AFTER_MS, described_rows, judged
from engine.internal_jobs import INTERNAL_JOBS
from engine.tasks.declare import TaskDefinition, tasks_of
from schemas.descriptor import JobDescriptor, PublishedTask, RetentionInfo

# A published description is cut to this many characters: a row carries many tasks.
DESCRIPTION_CHARS = 200


@dataclass(frozen=True)
class SeenTask:
    """A published task as read: from its newest row, and whether a live worker published it."""

    task: PublishedTask
    published_at: int
    apps: tuple[str, ...]
    live: bool
    retired: bool = False
    # A live worker running a scheduler published it (`scheduled_at` within the window).
    scheduled: bool = False


def cut(text: str | None, chars: int) -> str | None:
    """`text` cut to `chars` characters, an ellipsis marking the cut."""
    if text is None or len(text) <= chars:
        return text
    return text[: chars - 1] + "…"


def as_published(definition: TaskDefinition) -> PublishedTask:
    return PublishedTask(
        name=definition.name,
        cron=definition.cron,
        timezone=definition.tz,
        catch_up=definition.catch_up,
        max_catch_up=definition.max_catch_up,
        description=cut(definition.description, DESCRIPTION_CHARS),
        module=definition.declared_by.partition(":")[0],
    )


def describe_all(
    registry: JobRegistry,
    apps: Sequence[str],
    retention: Callable[[str], RetentionInfo] | None = None,
) -> list[JobDescriptor]:
    """What a worker publishes: each job's descriptor (engine.descriptors.described_rows) with
    the registry's cron tasks carried on them (`with_tasks`)."""
    return with_tasks(registry, described_rows(registry, apps, retention))


def with_tasks(
    registry: JobRegistry, rows: Sequence[tuple[JobDescriptor, str]]
) -> list[JobDescriptor]:
    """`rows` (each descriptor a worker publishes, with its job's module), each task of
    `registry` carried by its carrier's row. The engine's own jobs carry tasks only for a worker
    with no other: every worker publishes them, whatever tasks it declares."""
    tasks = list(tasks_of(registry))
    if not tasks or not rows:
        return [descriptor for descriptor, _ in rows]
    carriers = [row for row in rows if row[0].name not in INTERNAL_JOBS] or list(rows)
    carried: dict[str, list[PublishedTask]] = {}
    for definition in tasks:
        published = as_published(definition)
        carrier = _carrier(published, carriers)
        carried.setdefault(carrier, []).append(published)
    return [
        descriptor.model_copy(update={"tasks": carried[descriptor.name]})
        if descriptor.name in carried
        else descriptor
        for descriptor, _ in rows
    ]


def _carrier(task: PublishedTask, rows: Sequence[tuple[JobDescriptor, str]]) -> str:
    def shared(module: str) -> int:
        common = 0
        for mine, theirs in zip(task.module.split("."), module.split("."), strict=False):
            if mine != theirs:
                break
            common += 1
        return common

    nearest = max(shared(module) for _, module in rows)
    candidates = sorted(d.name for d, module in rows if shared(module) == nearest)
    # crc32, not hash(): every process picks the same one for the same name.
    return candidates[zlib.crc32(task.name.encode()) % len(candidates)]


def scheduling_marked(
    rows: Sequence[JobDescriptor], at: int | None, stored: Sequence[JobDescriptor]
) -> list[JobDescriptor]:
    """`rows` (about to be published) with each task's `scheduled_at`: `at` when this worker
    runs a scheduler (None: it does not), else the stamp `stored` rows hold for the task,
    carried forward (0: no scheduler has published it)."""
    kept: dict[str, int] = {}
    if at is None:
        for row in stored:
            for task in row.tasks or ():
                stamp = task.scheduled_at
                stamp = (row.published_at or 0) if stamp is None else stamp
                kept[task.name] = max(kept.get(task.name, 0), stamp)
    marked = []
    for row in rows:
        if row.tasks:
            tasks = [
                t.model_copy(update={"scheduled_at": at if at is not None else kept.get(t.name, 0)})
                for t in row.tasks
            ]
            row = row.model_copy(update={"tasks": tasks})
        marked.append(row)
    return marked


def read_back(rows: Sequence[JobDescriptor], now: int) -> dict[str, SeenTask]:
    """The tasks `rows` (published descriptors as stored) carry, by name, each from its newest
    row."""
    seen: dict[str, SeenTask] = {}
    live_apps: set[str] = set()
    for row in rows:
        live = not judged(row, now).stale
        if live:
            live_apps.update(row.apps or ())
        for task in row.tasks or ():
            at = row.published_at or 0
            found = seen.get(task.name)
            if found is None or at > found.published_at:
                stamp = task.scheduled_at if task.scheduled_at is not None else at
                scheduled = live and stamp >= now - STALE_AFTER_MS
                seen[task.name] = SeenTask(
                    task, at, tuple(row.apps or ()), live, scheduled=scheduled
                )
    for name, found in seen.items():
        if not found.live and found.apps and set(found.apps) <= live_apps:
            seen[name] = SeenTask(found.task, found.published_at, found.apps, False, True)
    return seen


__all__ = [
    "DESCRIPTION_CHARS",
    "SeenTask",
    "as_published",
    "cut",
    "describe_all",
    "read_back",
    "scheduling_marked",
    "with_tasks",
]
