"""Pauses (engine/pauses.py) on Redis: one hash `P pauses`, field `<kind>:<name>` -> the Pause
as JSON. The claim script reads the same hash in its atomic step, so a pause holds from the
next claim after it is stored (a paused queue is skipped whole; a paused name per job)."""

from __future__ import annotations

from typing import cast

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
    return Pause.model_validate_json(cast(str, stored)), not created


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
    return Pause.model_validate_json(cast(str, stored))


def _changed(store: Store) -> Write:
    w = Write()
    w.op("!changed", store.keys.prefix)
    return w


async def pauses(store: Store) -> list[Pause]:
    found = [Pause.model_validate_json(v) for v in await store.hvals(store.keys.pauses)]
    return sorted(found, key=lambda p: (p.kind, p.name))
