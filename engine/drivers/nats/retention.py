"""Retention: settled jobs walked oldest `finished_at` first (from the replica after a sync),
each deleted by compare-and-set on the revision read — so two pruners at once never take one
job twice — with every other key it created: its dedupe index key (when it still names it),
its cap slots, its event waiter and its rate reservation. Steps, events and progress live in
the job's document and go with it. A KV delete leaves a delete marker per key (how NATS KV
tells watchers); `kv.keys()` lists none of them."""

from __future__ import annotations

from collections.abc import Iterable

from engine.drivers.nats import keys, rate_limits, slots
from engine.drivers.nats.enqueue import free_key
from engine.drivers.nats.store import Store
from engine.retention import Cutoffs, PruneCount
from engine.rules import LIVE_STATES
from schemas.jobs import JobRecord
from schemas.states import JobState


async def _expired(
    store: Store, cutoffs: Cutoffs, tenant_id: str | None
) -> list[tuple[int, JobRecord]]:
    await store.replica.sync()
    found = [
        (revision, doc.record)
        for revision, doc in store.replica.docs()
        if doc.record.state not in LIVE_STATES
        and (tenant_id is None or doc.record.tenant_id == tenant_id)
        and cutoffs.expired(doc.record.name, doc.record.state, doc.record.finished_at)
    ]
    found.sort(key=lambda t: (t[1].finished_at or 0, t[1].id))
    return found


async def prune_counts(store: Store, cutoffs: Cutoffs, tenant_id: str | None) -> list[PruneCount]:
    return _counted(job for _, job in await _expired(store, cutoffs, tenant_id))


async def prune(
    store: Store, cutoffs: Cutoffs, limit: int, tenant_id: str | None
) -> list[PruneCount]:
    gone: list[JobRecord] = []
    for revision, job in (await _expired(store, cutoffs, tenant_id))[: max(0, limit)]:
        # The index key first: once the job is gone, an index key naming it must not remain.
        await free_key(store, job)
        if not await store.delete(keys.job(job.id), revision):
            continue  # changed or taken by another pruner since the read
        gone.append(job)
        await slots.release_slots(store, job.id)
        await rate_limits.forget_reservation(store, job.id)
        if store.replica.get(keys.waiter(job.id)) is not None:
            await store.kv.delete(keys.waiter(job.id))
    if gone:
        store.changes.notify()
    return _counted(gone)


def _counted(jobs: Iterable[JobRecord]) -> list[PruneCount]:
    counts: dict[tuple[JobState, str], int] = {}
    for job in jobs:
        key = (job.state, job.queue)
        counts[key] = counts.get(key, 0) + 1
    return [PruneCount(state, queue, n) for (state, queue), n in sorted(counts.items())]
