"""Scheduler state and named leader leases: each lease one script (take when free, expired or
already held), each task's claim one compare-and-set script, which a firing runs inside the
script that enqueues the occurrences' jobs."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import cast

from engine.drivers.damage import or_none, stored_failure
from engine.drivers.redis import enqueue
from engine.drivers.redis.scripts import LEAD_SCRIPT, TASK_CLAIM_SCRIPT
from engine.drivers.redis.store import Store
from schemas.jobs import EnqueueRequest, EnqueueResult
from schemas.scheduler import TaskFailure, TaskState


async def lead(store: Store, name: str, holder: str, lease_ms: int) -> bool:
    args = [store.keys.leaders, name, holder, store.clock.now_ms(), lease_ms]
    return int(await LEAD_SCRIPT(store.client, args)) == 1


async def task_state(store: Store, task: str) -> TaskState | None:
    # A failure is kept in a hash of its own: earlier builds' scripts read the state's value.
    pipe = store.client.pipeline(transaction=False)
    pipe.hget(store.keys.tasks, task)
    pipe.hget(store.keys.taskfail, task)
    raw, failed = cast(list[str | None], await pipe.execute())
    failure = stored_failure(failed, task)
    if raw is None:
        # Failing before it ever fired: the failure is the whole state.
        if failure is None:
            return None
        at = failure.last_failed_at
        return TaskState(task=task, last_fired_at=None, updated_at=at, failure=failure)
    last, _, updated = raw.partition("|")
    # Another program's value is no state: the task fires from now, its keys dedupe a repeat.
    state = partial(TaskState, task=task, last_fired_at=last, updated_at=updated, failure=failure)
    return or_none(state, f"the scheduler state of task {task!r}")


async def task_claim(store: Store, task: str, expected: int | None, occurrence_ms: int) -> bool:
    wanted = "" if expected is None else str(expected)
    now = store.clock.now_ms()
    args = [store.keys.tasks, task, wanted, occurrence_ms, now, store.keys.taskfail]
    return int(await TASK_CLAIM_SCRIPT(store.client, args)) == 1


async def task_fire(
    store: Store,
    task: str,
    expected: int | None,
    occurrence_ms: int,
    requests: Sequence[EnqueueRequest],
) -> list[EnqueueResult] | None:
    """The claim and the jobs in one script (scripts.ENQUEUE with a claim): Redis runs it
    whole, so no process dies between them."""
    if not requests:
        return [] if await task_claim(store, task, expected, occurrence_ms) else None
    claim = enqueue.TaskClaim(task, expected, occurrence_ms)
    return await enqueue.enqueue_claiming(store, requests, store.clock.now_ms(), claim=claim)


async def task_failure(store: Store, task: str, failure: TaskFailure) -> None:
    await store.hset(store.keys.taskfail, {task: failure.model_dump_json()})
