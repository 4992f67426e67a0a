"""Pauses: one create-only key per (kind, name); every claim filters by the pauses the
replica holds after its sync, so a pause holds from the next claim after it is written."""

from __future__ import annotations

from engine.drivers.nats import keys
from engine.drivers.nats.codec import dumps, loads
from engine.drivers.nats.store import Store
from engine.pauses import PauseKey
from schemas.pauses import Pause, PauseKind


def paused(store: Store) -> set[PauseKey]:
    found: set[PauseKey] = set()
    for _, entry in store.replica.family("pause"):
        pause = Pause.model_validate(loads(entry.raw))
        found.add((pause.kind, pause.name))
    return found


async def pause(
    store: Store, kind: PauseKind, name: str, actor: str | None, reason: str | None, now: int
) -> tuple[Pause, bool]:
    key = keys.pause(kind, name)
    made = Pause(kind=kind, name=name, paused_by=actor, paused_at=now, reason=reason)
    while True:
        if await store.write(key, dumps(made.model_dump(mode="json")), 0) is not None:
            store.changes.notify()
            return made, False
        entry = await store.fresh(key)
        if entry is not None:
            return Pause.model_validate(loads(entry.raw)), True


async def resume(store: Store, kind: PauseKind, name: str) -> Pause | None:
    key = keys.pause(kind, name)
    while True:
        entry = await store.fresh(key)
        if entry is None:
            return None
        if await store.delete(key, entry.revision):
            # Held jobs are claimable again: idle workers look now, not at their next poll.
            store.waker.notify()
            store.changes.notify()
            return Pause.model_validate(loads(entry.raw))


async def pauses(store: Store) -> list[Pause]:
    await store.replica.sync()
    found = [Pause.model_validate(loads(e.raw)) for _, e in store.replica.family("pause")]
    return sorted(found, key=lambda p: (p.kind, p.name))
