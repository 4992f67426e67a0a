"""Leadership leases and cron state, compare-and-set on one key each.

A lease is taken when it is absent, expired or already ours, by CAS on the revision read: of
two processes racing for an expired lease one write lands, so one scheduler leads each task.
A task's last fired occurrence moves only by a claim compared with the server's value; its
failure is stored beside it, and a claim (which writes the state anew) clears it."""

from __future__ import annotations

from typing import TypeVar

from pydantic import BaseModel

from engine.drivers.damage import or_none
from engine.drivers.nats import keys
from engine.drivers.nats.codec import dumps, loads
from engine.drivers.nats.store import Store
from schemas.scheduler import LeaderLease, TaskFailure, TaskState

M = TypeVar("M", bound=BaseModel)


class _Held(Exception):
    """The lease, or the task's last fired occurrence, is not this caller's to take."""


async def lead(store: Store, name: str, holder: str, lease_ms: int) -> bool:
    now = store.clock.now_ms()

    def take(raw: bytes | None) -> bytes:
        lease = None if raw is None else _stored(LeaderLease, raw, f"lease {name!r}")
        if lease is not None and lease.holder != holder and lease.expires_at > now:
            raise _Held
        return dumps({"holder": holder, "expires_at": now + lease_ms})

    try:
        # Fresh first: a lease is decided on the server's value, never a lagging copy.
        await store.fresh(keys.lead(name))
        await store.change_key(keys.lead(name), take)
    except _Held:
        return False
    return True


async def task_state(store: Store, task: str) -> TaskState | None:
    entry = await store.fresh(keys.task(task))
    return None if entry is None else _stored(TaskState, entry.raw, _state_of(task))


async def task_claim(store: Store, task: str, expected: int | None, occurrence_ms: int) -> bool:
    now = store.clock.now_ms()

    def claim(raw: bytes | None) -> bytes:
        current = None if raw is None else _stored(TaskState, raw, _state_of(task))
        if (current.last_fired_at if current is not None else None) != expected:
            raise _Held
        return dumps(TaskState(task=task, last_fired_at=occurrence_ms, updated_at=now).model_dump())

    try:
        # Fresh first, as a lease: compared with the server's value, never a lagging copy.
        await store.fresh(keys.task(task))
        await store.change_key(keys.task(task), claim)
    except _Held:
        return False
    return True


async def task_failure(store: Store, task: str, failure: TaskFailure) -> None:
    now = store.clock.now_ms()

    def failed(raw: bytes | None) -> bytes:
        current = None if raw is None else _stored(TaskState, raw, _state_of(task))
        last = current.last_fired_at if current is not None else None
        state = TaskState(task=task, last_fired_at=last, updated_at=now, failure=failure)
        return dumps(state.model_dump(mode="json"))

    # Compare-and-set on the revision read: a claim landing meanwhile is never written over.
    await store.change_key(keys.task(task), failed)


def _stored(model: type[M], raw: bytes, named: str) -> M | None:
    # Another program's value is none: a lease is taken over, a task fires from now (its
    # occurrence keys dedupe a repeat) and its next firing writes the state anew.
    return or_none(lambda: model.model_validate(loads(raw)), named)


def _state_of(task: str) -> str:
    return f"the scheduler state of task {task!r}"
