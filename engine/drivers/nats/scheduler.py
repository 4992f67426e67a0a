"""Leadership leases and cron state, compare-and-set on one key each.

A lease is taken when it is absent, expired or already ours, by CAS on the revision read: of
two processes racing for an expired lease one write lands, so one scheduler fires each tick.
A task's last fired occurrence only moves forward (the CAS retries from a fresh read)."""

from __future__ import annotations

from engine.drivers.nats import keys
from engine.drivers.nats.codec import dumps, loads
from engine.drivers.nats.store import Store, Unchanged
from schemas.scheduler import LeaderLease, TaskState


class _Held(Exception):
    pass


async def lead(store: Store, name: str, holder: str, lease_ms: int) -> bool:
    now = store.clock.now_ms()

    def take(raw: bytes | None) -> bytes:
        if raw is not None:
            lease = LeaderLease.model_validate(loads(raw))
            if lease.holder != holder and lease.expires_at > now:
                raise _Held
        return dumps({"holder": holder, "expires_at": now + lease_ms})

    try:
        # Fresh first: a lease is decided on the server's value, never a lagging copy.
        await store.fresh(keys.lead(name))
        await store.change_key(keys.lead(name), take)
    except _Held:
        return False
    return True


async def scheduler_lead(store: Store, holder: str, lease_ms: int) -> bool:
    return await lead(store, keys.SCHEDULER_LEADER, holder, lease_ms)


async def task_state(store: Store, task: str) -> TaskState | None:
    entry = await store.fresh(keys.task(task))
    return None if entry is None else TaskState.model_validate(loads(entry.raw))


async def task_fired(store: Store, task: str, occurrence_ms: int) -> None:
    now = store.clock.now_ms()

    def fired(raw: bytes | None) -> bytes:
        last = occurrence_ms
        if raw is not None:
            current = TaskState.model_validate(loads(raw))
            if current.last_fired_at is not None and current.last_fired_at >= occurrence_ms:
                raise Unchanged
        return dumps(TaskState(task=task, last_fired_at=last, updated_at=now).model_dump())

    await store.change_key(keys.task(task), fired)
