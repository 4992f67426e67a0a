"""Pauses (engine/pauses.py) on Redis: one hash `P pauses`, field `<kind>:<name>` -> the Pause
as JSON. The claim script reads the same hash in its atomic step, so a pause holds from the
next claim after it is stored (a paused queue is skipped whole; a paused name per job)."""

from __future__ import annotations

import json
from typing import cast

from engine.drivers.damage import pause_as_stored, readable
from engine.drivers.redis.store import Store, Write
from schemas.pauses import Pause, PauseKind


def pause_field(kind: PauseKind, name: str) -> str:
    # The kind never holds a colon, so the first one splits the field unambiguously.
    return f"{kind}:{name}"


async def pause(
    store: Store, kind: PauseKind, name: str, actor: str | None, reason: str | None, now: int
) -> tuple[Pause, bool]:
    made = Pause(kind=kind, name=name, paused_by=actor, paused_at=now, reason=reason)
    field = pause_field(kind, name)
    # HSETNX decides who was first; the HGET in the same MULTI reads the pause that won.
    pipe = store.client.pipeline(transaction=True)
    pipe.hsetnx(store.keys.pauses, field, made.model_dump_json())
    pipe.hget(store.keys.pauses, field)
    created, stored = await pipe.execute()
    if created:
        # An operator's rare action: a second round trip here costs the hot path nothing.
        await store.apply(_changed(store))
    return _pause(field, cast(str, stored)), not created


async def resume(store: Store, kind: PauseKind, name: str) -> Pause | None:
    field = pause_field(kind, name)
    pipe = store.client.pipeline(transaction=True)
    pipe.hget(store.keys.pauses, field)
    pipe.hdel(store.keys.pauses, field)
    stored, _ = await pipe.execute()
    if stored is None:
        return None
    # Held jobs are claimable again: idle workers in every process look now, not at their poll.
    w = _changed(store)
    w.op("PUBLISH", store.keys.wake, "1")
    await store.apply(w)
    return _pause(field, stored)


def _changed(store: Store) -> Write:
    w = Write()
    w.op("!changed", store.keys.prefix)
    return w


async def pauses(store: Store) -> list[Pause]:
    stored = (await store.hgetall(store.keys.pauses)).items()
    found = readable(stored, lambda pair: _pause(*pair), lambda pair: f"pause field {pair[0]!r}")
    return sorted(found, key=lambda p: (p.kind, p.name))


def _pause(field: str, stored: str) -> Pause:
    # The field is what the claim script holds by; the value only says who, when and why.
    kind, _, name = field.partition(":")
    return pause_as_stored(kind, name, lambda: json.loads(stored))
