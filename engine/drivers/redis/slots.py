"""Limiter slots: caps shared by every worker on this server, taken all or nothing."""

from __future__ import annotations

from collections.abc import Sequence

from engine.drivers.redis.scripts import ACQUIRE_SLOTS_SCRIPT
from engine.drivers.redis.store import Store, Write


async def acquire_slots(
    store: Store, job_id: str, caps: Sequence[tuple[str, int]], expires_at: int
) -> str | None:
    args: list[object] = [store.keys.prefix, job_id, expires_at, store.clock.now_ms()]
    for key, cap in caps:
        args += [key, cap]
    full = await ACQUIRE_SLOTS_SCRIPT(store.client, args)
    return str(full) or None


async def release_slots(store: Store, job_id: str) -> None:
    w = Write()
    w.op("!release", store.keys.job_slots(job_id), store.keys.slot_prefix, job_id)
    await store.apply(w)
