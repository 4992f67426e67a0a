"""Leadership leases and cron state, compare-and-set on one key each.

A lease is taken when it is absent, expired or already ours, by CAS on the revision read: of
two processes racing for an expired lease one write lands, so one scheduler leads each task.
A task's last fired occurrence moves only by a claim compared with the server's value; its
failure is stored beside it, and a claim (which writes the state anew) clears it.

NATS has no transaction spanning the claim and the jobs' keys, so a firing (`task_fire`) is
at least once, not atomic: the claim records the occurrences it claims in the same value
(`unfinished`), the jobs go in, and a second CAS forgets them. A process that dies between
leaves them recorded, and the next round of the scheduler leading the task enqueues them again
(`task_unfinished`): their idempotency keys dedupe any job that did go in and is still live; a
job that went in and already finished before the record was forgotten runs again."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TypeVar

from pydantic import BaseModel

from engine.drivers.damage import UNDECODABLE, or_none
from engine.drivers.nats import enqueue, keys
from engine.drivers.nats.codec import dumps, loads, loads_object
from engine.drivers.nats.store import Store, Unchanged
from schemas.jobs import EnqueueRequest, EnqueueResult
from schemas.scheduler import LeaderLease, TaskFailure, TaskState

M = TypeVar("M", bound=BaseModel)

# The field of a task's state listing the occurrences claimed whose jobs may not all be in.
UNFINISHED = "unfinished"


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
    return await _claim(store, task, expected, occurrence_ms, ())


async def _claim(
    store: Store, task: str, expected: int | None, occurrence_ms: int, unfinished: Sequence[int]
) -> bool:
    """Move the last fired occurrence from `expected` to `occurrence_ms`, recording
    `unfinished` beside any occurrences recorded already."""
    now = store.clock.now_ms()

    def claim(raw: bytes | None) -> bytes:
        current = None if raw is None else _stored(TaskState, raw, _state_of(task))
        if (current.last_fired_at if current is not None else None) != expected:
            raise _Held
        state = TaskState(task=task, last_fired_at=occurrence_ms, updated_at=now)
        return _written(state, [*_unfinished(raw), *unfinished])

    try:
        # Fresh first, as a lease: compared with the server's value, never a lagging copy.
        await store.fresh(keys.task(task))
        await store.change_key(keys.task(task), claim)
    except _Held:
        return False
    return True


async def task_fire(
    store: Store,
    task: str,
    expected: int | None,
    occurrences: Sequence[int],
    requests: Sequence[EnqueueRequest],
) -> list[EnqueueResult] | None:
    if not await _claim(store, task, expected, occurrences[-1], occurrences if requests else ()):
        return None
    if not requests:
        return []
    results = await enqueue.enqueue(store, requests, store.clock.now_ms())
    await task_finished(store, task, occurrences)
    return results


async def task_unfinished(store: Store, task: str) -> list[int]:
    # The replica's copy: the scheduler read the state fresh just before.
    entry = await store.read(keys.task(task))
    return [] if entry is None else _unfinished(entry.raw)


async def task_finished(store: Store, task: str, occurrences: Sequence[int]) -> None:
    done = set(occurrences)

    def forget(raw: bytes | None) -> bytes:
        recorded = _unfinished(raw)
        current = None if raw is None else _stored(TaskState, raw, _state_of(task))
        if current is None or done.isdisjoint(recorded):
            raise Unchanged
        return _written(current, [o for o in recorded if o not in done])

    await store.change_key(keys.task(task), forget)


async def task_failure(store: Store, task: str, failure: TaskFailure) -> None:
    now = store.clock.now_ms()

    def failed(raw: bytes | None) -> bytes:
        current = None if raw is None else _stored(TaskState, raw, _state_of(task))
        last = current.last_fired_at if current is not None else None
        state = TaskState(task=task, last_fired_at=last, updated_at=now, failure=failure)
        return _written(state, _unfinished(raw))

    # Compare-and-set on the revision read: a claim landing meanwhile is never written over.
    await store.change_key(keys.task(task), failed)


def _written(state: TaskState, unfinished: Iterable[int]) -> bytes:
    data = state.model_dump(mode="json")
    recorded = sorted(set(unfinished))
    if recorded:
        data[UNFINISHED] = recorded
    return dumps(data)


def _unfinished(raw: bytes | None) -> list[int]:
    """The occurrences `raw` records as unfinished; none in a value of another shape (its
    state reads as none too, and the task fires on from now)."""
    if raw is None:
        return []
    try:
        listed = loads_object(raw).get(UNFINISHED, [])
    except UNDECODABLE:
        return []
    if not isinstance(listed, list):
        return []
    return sorted({o for o in listed if type(o) is int})


def _stored(model: type[M], raw: bytes, named: str) -> M | None:
    # Another program's value is none: a lease is taken over, a task fires from now (its
    # occurrence keys dedupe a repeat) and its next firing writes the state anew.
    return or_none(lambda: model.model_validate(loads(raw)), named)


def _state_of(task: str) -> str:
    return f"the scheduler state of task {task!r}"
