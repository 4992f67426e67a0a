"""Which of a cron task's jobs died: the newest dead jobs, read once (DEAD_SCAN of them, newest
first), grouped by the task that enqueued them (`enqueued_by = "task:<name>"`). A task that
fires on time while every job it enqueues dies looks healthy otherwise.

The read is bounded, so it sees a task's dead jobs while they are among the newest dead ones;
a dead job retried, or pruned, leaves it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict

from engine.tasks.declare import TASK_ACTOR

if TYPE_CHECKING:
    from engine.client import Jobs

# Dead jobs one description reads, newest first.
DEAD_SCAN = 200


class TaskDeadRuns(BaseModel):
    """The jobs a task enqueued that used every attempt and died, among the newest dead jobs."""

    model_config = ConfigDict(frozen=True)

    count: int  # of them, among the DEAD_SCAN newest dead jobs
    job_id: str  # the newest of them
    job: str  # its job name
    queue: str
    # It was enqueued for the task's last fired occurrence: the task's latest run died.
    last_fired: bool
    error_code: str | None = None


def occurrence_of(task: str, key: str) -> int | None:
    """The occurrence a job of `task` was enqueued for, from its key `task:<name>:<ms>[#n]`
    (engine/tasks/scheduler.py); None for a key of another shape."""
    head = f"{TASK_ACTOR}{task}:"
    if not key.startswith(head):
        return None
    digits = key[len(head) :].partition("#")[0]
    return int(digits) if digits.isdigit() else None


async def dead_runs(
    jobs: Jobs, last_fired: Mapping[str, int | None], tenant_id: str | None = None
) -> dict[str, TaskDeadRuns]:
    """The dead jobs of each task named in `last_fired` (task → its last fired occurrence), by
    task, among the newest DEAD_SCAN dead jobs (`tenant_id`'s only, when given)."""
    if not last_fired:
        return {}
    page = await jobs.list(state="dead", tenant_id=tenant_id, limit=DEAD_SCAN)
    found: dict[str, TaskDeadRuns] = {}
    for job in page.jobs:  # newest first: a task's first is its newest
        actor = job.enqueued_by or ""
        task = actor[len(TASK_ACTOR) :] if actor.startswith(TASK_ACTOR) else None
        if task is None or task not in last_fired:
            continue
        runs = found.get(task)
        if runs is not None:
            found[task] = runs.model_copy(update={"count": runs.count + 1})
            continue
        occurrence = occurrence_of(task, job.idempotency_key)
        found[task] = TaskDeadRuns(
            count=1,
            job_id=job.id,
            job=job.name,
            queue=job.queue,
            last_fired=occurrence is not None and occurrence == last_fired[task],
            error_code=job.last_error.code if job.last_error is not None else None,
        )
    return found


__all__ = ["DEAD_SCAN", "TaskDeadRuns", "dead_runs", "occurrence_of"]
