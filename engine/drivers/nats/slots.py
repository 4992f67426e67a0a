"""Concurrency caps held in the store, shared by every process: ONE document, `slots`, maps
each cap key to its holders (job id -> slot expiry), changed by compare-and-set only.

Taking slots under several caps (global, queue, tenant, job) must be all or nothing, and the
answer must name the cap that was full; NATS KV writes one key atomically, so the caps share
one key. The price is one hot key: every take and release by any worker writes it (a conflict
retries from a fresh read). A job with no caps never touches it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from engine.drivers.damage import or_none, readable
from engine.drivers.nats.codec import dumps, loads_object
from engine.drivers.nats.store import Store, Unchanged

KEY = "slots"
Holders = dict[str, dict[str, int]]


class _Full(Exception):
    def __init__(self, key: str) -> None:
        self.key = key


def _held(raw: bytes | None) -> Holders:
    """The document as the caps read it. What another program wrote is none, logged once: a
    cap's holders that cannot be read hold nothing (better a cap exceeded while its holders
    finish than every take under it failing), and the next take writes the document anew."""
    if raw is None:
        return {}
    data = or_none(lambda: loads_object(raw), f"the {KEY!r} document") or {}
    return dict(readable(data.items(), _holders, lambda kv: f"the holders of cap {kv[0]!r}"))


def _holders(kv: tuple[str, Any]) -> tuple[str, dict[str, int]]:
    key, holders = kv
    if not isinstance(holders, dict) or not all(
        isinstance(e, int) and not isinstance(e, bool) for e in holders.values()
    ):
        raise TypeError(f"holders {holders!r:.100}")
    return key, holders


async def acquire_slots(
    store: Store, job_id: str, caps: Sequence[tuple[str, int]], expires_at: int
) -> str | None:
    now = store.clock.now_ms()

    def take(raw: bytes | None) -> bytes:
        held = _held(raw)
        for key, cap in caps:
            alive = {j: exp for j, exp in held.get(key, {}).items() if exp > now}
            if sum(1 for j in alive if j != job_id) >= cap:
                raise _Full(key)
            held[key] = alive
        for key, _ in caps:
            held[key][job_id] = expires_at
        return dumps(held)

    try:
        # Fresh first: a cap is decided on the server's document, not a lagging copy.
        await store.fresh(KEY)
        await store.change_key(KEY, take)
    except _Full as full:
        return full.key
    return None


def _holds(store: Store, job_id: str) -> bool:
    entry = store.replica.get(KEY)
    return entry is not None and any(job_id in h for h in _held(entry.raw).values())


async def release_slots(store: Store, job_id: str) -> None:
    if not _holds(store, job_id):
        return

    def drop(raw: bytes | None) -> bytes | None:
        held = _held(raw)
        if not any(job_id in h for h in held.values()):
            raise Unchanged
        kept = {k: {j: e for j, e in h.items() if j != job_id} for k, h in held.items()}
        kept = {k: h for k, h in kept.items() if h}
        return dumps(kept) if kept else None

    await store.change_key(KEY, drop)


async def extend_slots(store: Store, job_id: str, expires_at: int) -> None:
    if not _holds(store, job_id):
        return

    def extend(raw: bytes | None) -> bytes:
        held = _held(raw)
        if not any(job_id in h for h in held.values()):
            raise Unchanged
        for holders in held.values():
            if job_id in holders:
                holders[job_id] = expires_at
        return dumps(held)

    await store.change_key(KEY, extend)
