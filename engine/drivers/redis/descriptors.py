"""Published job descriptors: one hash field per job name, the last writer wins."""

from __future__ import annotations

from collections.abc import Sequence

from engine.descriptors import decode, encode, forgettable, stamped
from engine.drivers.redis.store import Store, Write
from schemas.descriptor import JobDescriptor


async def publish_descriptors(
    store: Store, worker_id: str, descriptors: Sequence[JobDescriptor], now: int
) -> None:
    if descriptors:
        w = Write()
        for d in descriptors:
            w.op("HSET", store.keys.desc, d.name, encode(stamped(d, worker_id, now)))
        w.op("!changed", store.keys.prefix)  # in the same script: no round trip added
        await store.apply(w)


async def published_descriptors(store: Store, name: str | None) -> list[JobDescriptor]:
    if name is not None:
        text = await store.hget(store.keys.desc, name)
        return [] if text is None else [decode(name, text)]
    rows = await store.hgetall(store.keys.desc)
    return [decode(n, rows[n]) for n in sorted(rows)]


async def forget_descriptors(store: Store, published_before: int) -> int:
    rows = await store.hgetall(store.keys.desc)
    w = Write()
    for name, text in rows.items():
        if forgettable(name, text, published_before):
            # Only the descriptor as read: one published again meanwhile stays.
            w.op("!hdel_if", store.keys.desc, name, text)
    if not w.ops:
        return 0
    w.op("!changed", store.keys.prefix)
    return await store.apply(w)
