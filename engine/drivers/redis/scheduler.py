"""Scheduler state and named leader leases: each lease one script (take when free, expired or
already held), each task's last occurrence one script that never moves it backwards."""

from __future__ import annotations

from functools import partial

from engine.drivers.damage import or_none
from engine.drivers.redis.scripts import LEAD_SCRIPT, TASK_CLAIM_SCRIPT, TASK_FIRED_SCRIPT
from engine.drivers.redis.store import Store
from schemas.scheduler import TaskState

_SCHEDULER_FIELD = "scheduler"


async def scheduler_lead(store: Store, holder: str, lease_ms: int) -> bool:
    args = [store.keys.sched, _SCHEDULER_FIELD, holder, store.clock.now_ms(), lease_ms]
    return int(await LEAD_SCRIPT(store.client, args)) == 1


async def lead(store: Store, name: str, holder: str, lease_ms: int) -> bool:
    args = [store.keys.leaders, name, holder, store.clock.now_ms(), lease_ms]
    return int(await LEAD_SCRIPT(store.client, args)) == 1


async def task_state(store: Store, task: str) -> TaskState | None:
    raw = await store.hget(store.keys.tasks, task)
    if raw is None:
        return None
    last, _, updated = raw.partition("|")
    # Another program's value is no state: the task fires from now, its keys dedupe a repeat.
    state = partial(TaskState, task=task, last_fired_at=last, updated_at=updated)
    return or_none(state, f"the scheduler state of task {task!r}")


async def task_fired(store: Store, task: str, occurrence_ms: int) -> None:
    args = [store.keys.tasks, task, occurrence_ms, store.clock.now_ms()]
    await TASK_FIRED_SCRIPT(store.client, args)


async def task_claim(store: Store, task: str, expected: int | None, occurrence_ms: int) -> bool:
    wanted = "" if expected is None else str(expected)
    args = [store.keys.tasks, task, wanted, occurrence_ms, store.clock.now_ms()]
    return int(await TASK_CLAIM_SCRIPT(store.client, args)) == 1
