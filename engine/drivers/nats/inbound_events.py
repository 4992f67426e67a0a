"""Inbound events and the jobs waiting for them: an event is a create-only key, a waiter a key
per job; a send wakes each matching suspended job by CAS on its document (run_at moved to now),
so the wake-up reaches idle workers as any job write does, pushed by the server."""

from __future__ import annotations

from functools import partial

from engine.drivers.damage import UNDECODABLE, or_none, readable
from engine.drivers.nats import keys
from engine.drivers.nats.codec import JobDoc, dumps, loads
from engine.drivers.nats.replica import Entry
from engine.drivers.nats.store import Store, Unchanged
from engine.inbound_events import EventCursor, InboundEvent
from engine.inbound_events import matches as event_matches
from engine.inbound_events import order as event_order
from engine.rules import LIVE_STATES


async def send_event(store: Store, event: InboundEvent, now: int) -> int:
    await store.write(keys.inbound(event.id), dumps(event.model_dump(mode="json")), 0)
    await store.replica.sync()
    target = [event.name, event.key, event.tenant_id]
    woken = 0
    for key, entry in store.replica.family("wait"):
        # A wait key another program wrote matches no event (logged once); its waiter times out.
        waits_for = or_none(partial(loads, entry.raw), f"wait key {key!r}")
        if waits_for == target and await wake_waiter(store, key.removeprefix("wait."), now):
            woken += 1
    return woken


async def first_event(
    store: Store,
    name: str,
    key: str,
    tenant_id: str | None,
    started_at: int,
    after: EventCursor | None,
) -> InboundEvent | None:
    await store.replica.sync()
    # A value another program wrote names no event a wait could match: passed over, logged once.
    events = readable(store.replica.family("iev"), _event, lambda pair: f"inbound key {pair[0]!r}")
    found = [e for e in events if event_matches(e, name, key, tenant_id, started_at, after)]
    return min(found, key=event_order, default=None)


async def await_event(
    store: Store, job_id: str, name: str, key: str, tenant_id: str | None
) -> None:
    raw = dumps([name, key, tenant_id])
    revision = await store.kv.put(keys.waiter(job_id), raw)
    store.replica.apply(keys.waiter(job_id), revision, raw)


async def forget_waiter(store: Store, job_id: str) -> None:
    if store.replica.get(keys.waiter(job_id)) is not None or await store.fresh(keys.waiter(job_id)):
        await store.kv.delete(keys.waiter(job_id))


async def wake_waiter(store: Store, job_id: str, now: int) -> bool:
    suspended = False

    def wake(doc: JobDoc | None) -> JobDoc:
        nonlocal suspended
        if doc is None:
            raise _Gone
        suspended = doc.record.state == "suspended"
        if not suspended or doc.record.run_at <= now:
            raise Unchanged
        woken = {"run_at": now, "queued_at": min(doc.record.queued_at, now)}
        return doc.with_record(doc.record.model_copy(update=woken), doc.token)

    try:
        await store.change_doc(job_id, wake)
    except _Gone:
        return False
    return suspended


def _event(pair: tuple[str, Entry]) -> InboundEvent:
    return InboundEvent.model_validate(loads(pair[1].raw))


class _Gone(Exception):
    pass


async def prune_events(store: Store, now: int) -> int:
    await store.replica.sync()
    gone = 0
    for key, entry in store.replica.family("iev"):
        try:
            expired = _event((key, entry)).expires_at <= now
        except UNDECODABLE:
            continue  # no expiry to read: left as stored (a wait logs it)
        if expired and await store.delete(key, entry.revision):
            gone += 1
    for key, entry in store.replica.family("wait"):
        held = store.replica.doc(keys.job(key.removeprefix("wait.")))
        if held is None or held[1].record.state not in LIVE_STATES:
            await store.delete(key, entry.revision)
    return gone
