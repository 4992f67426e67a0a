"""Inbound events (engine/inbound_events.py) on Redis.

An event is stored once (`P inbound`, with its expiry in `P inboundexp`) and indexed under its
target, the JSON [name, key, tenant] (`P ie:<target>`, by sent_at then id: the order a wait
reads). A waiting job is one field of `P waiters` and a member of `P waiting:<target>`; the send
script stores the event and wakes every suspended member in one atomic step.
"""

from __future__ import annotations

from typing import cast

from engine.drivers.damage import UNDECODABLE, UndecodableRow
from engine.drivers.redis.codec import dumps
from engine.drivers.redis.scripts import SEND_EVENT_SCRIPT, WAITER_SCRIPT, WAKE_WAITER_SCRIPT
from engine.drivers.redis.store import Store
from engine.inbound_events import EventCursor, InboundEvent, matches

# Events read per round trip while a wait looks for its first match.
_PAGE = 100


def target_of(name: str, key: str, tenant_id: str | None) -> str:
    # JSON keeps the three parts apart whatever they hold, and a null tenant apart from "".
    return dumps([name, key, tenant_id])


async def send_event(store: Store, event: InboundEvent, now: int) -> int:
    args = [
        store.keys.prefix,
        event.id,
        target_of(event.name, event.key, event.tenant_id),
        event.model_dump_json(),
        event.sent_at,
        event.expires_at,
        now,
    ]
    return int(await SEND_EVENT_SCRIPT(store.client, args))


async def first_event(
    store: Store,
    name: str,
    key: str,
    tenant_id: str | None,
    started_at: int,
    after: EventCursor | None,
) -> InboundEvent | None:
    index = store.keys.inbound_target(target_of(name, key, tenant_id))
    low = "-inf" if after is None else str(after[0])
    offset = 0
    while True:
        ids = cast(
            list[str],
            await store.client.zrangebyscore(index, low, "+inf", start=offset, num=_PAGE),
        )
        if not ids:
            return None
        bodies = cast(list[str | None], await store.client.hmget(store.keys.inbound, ids))
        for event_id, body in zip(ids, bodies, strict=True):
            if body is None:  # pruned between the two reads
                continue
            event = _event(event_id, body)
            if matches(event, name, key, tenant_id, started_at, after):
                return event
        offset += _PAGE


async def await_event(
    store: Store, job_id: str, name: str, key: str, tenant_id: str | None
) -> None:
    await WAITER_SCRIPT(store.client, [store.keys.prefix, job_id, target_of(name, key, tenant_id)])


async def forget_waiter(store: Store, job_id: str) -> None:
    await WAITER_SCRIPT(store.client, [store.keys.prefix, job_id, ""])


async def wake_waiter(store: Store, job_id: str, now: int) -> bool:
    return bool(int(await WAKE_WAITER_SCRIPT(store.client, [store.keys.prefix, job_id, now])))


async def prune_events(store: Store, now: int) -> int:
    keys = store.keys
    gone = 0
    while True:
        ids = cast(
            list[str],
            await store.client.zrangebyscore(keys.inbound_expiry, "-inf", now, start=0, num=500),
        )
        if not ids:
            break
        bodies = cast(list[str | None], await store.client.hmget(keys.inbound, ids))
        # A body another program wrote names no target: its entry there is skipped by reads.
        events = [None if body is None else _decoded(body) for body in bodies]
        pipe = store.client.pipeline(transaction=True)
        for event_id, event in zip(ids, events, strict=True):
            pipe.zrem(keys.inbound_expiry, event_id)
            pipe.hdel(keys.inbound, event_id)
            if event is not None:
                target = target_of(event.name, event.key, event.tenant_id)
                pipe.zrem(keys.inbound_target(target), event_id)
        removed = await pipe.execute()
        # Counted by the expiry index's ZREM (each event's first command): a pruner running
        # beside this one counts only the events it removed itself.
        firsts, n = [], 0
        for event in events:
            firsts.append(removed[n])
            n += 2 if event is None else 3
        gone += sum(int(r) for r in firsts)
    await _forget_gone_waiters(store)
    return gone


async def _forget_gone_waiters(store: Store) -> None:
    """Delete the waiter rows of jobs no longer live (settled, or pruned already)."""
    waiting = cast(list[str], await store.client.hkeys(store.keys.waiters))
    if not waiting:
        return
    pipe = store.client.pipeline(transaction=False)
    for job_id in waiting:
        pipe.sismember(store.keys.live, job_id)
    alive = await pipe.execute()
    for job_id, live in zip(waiting, alive, strict=True):
        if not live:
            # Re-checked in the script: a retry may have made the job live and waiting again.
            await WAITER_SCRIPT(store.client, [store.keys.prefix, job_id, "", "gone"])


def _event(event_id: str, body: str) -> InboundEvent:
    """The event stored under `event_id`: one a waiter's target index lists for it, so a body
    another program wrote fails that wait (STORE_DAMAGED) rather than being passed over."""
    try:
        return InboundEvent.model_validate_json(body)
    except UNDECODABLE as exc:
        raise UndecodableRow("", exc, "inbound", event_id) from exc


def _decoded(body: str) -> InboundEvent | None:
    try:
        return InboundEvent.model_validate_json(body)
    except UNDECODABLE:
        return None
