"""Events of no job (the audit of calls that named no job the caller may see), deleted past
the audit retention.

They are `evx.` keys, named by their `at` (keys.loose_event), so the old ones are the keys
that sort before `keys.loose_events_before(cutoff)`: found by comparing key names in the
replica, and only those are decoded. An `evx.` key of an event that names a job (one not
stored here) is never deleted by this: as on the other drivers, only events with no job go.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from functools import partial

from engine.drivers.damage import or_none
from engine.drivers.nats import keys
from engine.drivers.nats.codec import loads
from engine.drivers.nats.replica import Entry
from engine.drivers.nats.store import Store

FAMILY = keys.LOOSE_EVENT.rstrip(".")


def _old(store: Store, before: int) -> Iterator[tuple[str, int]]:
    """(key, revision) of each event of no job recorded before `before`, oldest first."""
    bound = keys.loose_events_before(before)
    # A heap, not a sort: a batch pops what it takes, not every old key.
    candidates = [(k, e) for k, e in store.replica.family_unordered(FAMILY) if k < bound]
    heapq.heapify(candidates)
    while candidates:
        key, entry = heapq.heappop(candidates)
        # One another program wrote, named as an old event of no job, goes with them.
        read = partial(_jobless_before, entry, before)
        if or_none(read, f"event key {key!r}") is not False:
            yield key, entry.revision


def _jobless_before(entry: Entry, before: int) -> bool:
    # An earlier build named the key by wall-clock time, so `at` itself is checked.
    event = loads(entry.raw)
    return event.get("job_id") is None and int(event["at"]) < before


async def count(store: Store, before: int) -> int:
    await store.replica.sync()
    return sum(1 for _ in _old(store, before))


async def forget(store: Store, before: int, limit: int) -> int:
    await store.replica.sync()
    doomed: list[tuple[str, int]] = []
    for found in _old(store, before):
        if len(doomed) >= limit:
            break
        doomed.append(found)
    # By revision: an event is never written again, so none is skipped but a racer's delete.
    return sum([await store.delete(key, revision) for key, revision in doomed])
