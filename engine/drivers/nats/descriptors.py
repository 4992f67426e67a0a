"""Published job descriptors: one key per job name, the last writer wins."""

from __future__ import annotations

from collections.abc import Sequence

from engine.descriptors import decode, forgettable, stamped
from engine.drivers.nats import keys
from engine.drivers.nats.codec import dumps
from engine.drivers.nats.store import Store
from schemas.descriptor import JobDescriptor


async def publish_descriptors(
    store: Store, worker_id: str, descriptors: Sequence[JobDescriptor], now: int
) -> None:
    for descriptor in descriptors:
        raw = dumps(stamped(descriptor, worker_id, now).model_dump(mode="json"))
        revision = await store.kv.put(keys.descriptor(descriptor.name), raw)
        store.replica.apply(keys.descriptor(descriptor.name), revision, raw)


async def published_descriptors(store: Store, name: str | None) -> list[JobDescriptor]:
    if name is not None:
        entry = await store.fresh(keys.descriptor(name))
        return [] if entry is None else [decode(name, entry.raw)]
    await store.replica.sync()
    found = [decode(_name(key), e.raw) for key, e in store.replica.family("desc")]
    return sorted(found, key=lambda d: d.name)


async def forget_descriptors(store: Store, published_before: int) -> int:
    await store.replica.sync()
    gone = 0
    for key, entry in store.replica.family("desc"):
        if forgettable(_name(key), entry.raw, published_before) and await store.delete(
            key, entry.revision
        ):
            gone += 1
    if gone:
        store.changes.notify()
    return gone


def _name(key: str) -> str:
    # The job name the key encodes; the key itself where another program wrote the token.
    try:
        return keys.dec(key.removeprefix("desc."))
    except ValueError:
        return key
