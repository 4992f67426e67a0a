"""Pauses: one create-only key per (kind, name); every claim filters by the pauses the
replica holds after its sync, so a pause holds from the next claim after it is written."""

from __future__ import annotations

from engine.drivers.damage import pause_as_stored, readable
from engine.drivers.nats import keys
from engine.drivers.nats.codec import dumps, loads
from engine.drivers.nats.replica import Entry
from engine.drivers.nats.store import Store
from engine.pauses import PauseKey
from schemas.pauses import PAUSE_KINDS, Pause, PauseKind


def paused(store: Store) -> set[PauseKey]:
    """What every claim holds back, read from the keys alone: a pause holds by what it names,
    so a value another program wrote under it cannot stop the claim (or lift the pause)."""
    found = readable(store.replica.family("pause"), _held, lambda pair: f"pause key {pair[0]!r}")
    return set(found)


def _held(pair: tuple[str, Entry]) -> PauseKey:
    kind, _, token = pair[0].removeprefix("pause.").partition(".")
    if kind not in PAUSE_KINDS:
        raise ValueError(f"no pause kind {kind!r}")
    return kind, keys.dec(token)


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
            return _pause((key, entry)), True


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
            return _pause((key, entry))


async def pauses(store: Store) -> list[Pause]:
    await store.replica.sync()
    found = readable(store.replica.family("pause"), _pause, lambda pair: f"pause key {pair[0]!r}")
    return sorted(found, key=lambda p: (p.kind, p.name))


def _pause(pair: tuple[str, Entry]) -> Pause:
    # What the key holds is what claims hold by (`paused`); the value only says who, when, why.
    kind, name = _held(pair)
    return pause_as_stored(kind, name, lambda: loads(pair[1].raw))
