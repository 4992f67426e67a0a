"""Retention: settled rows walked oldest `finished_at` first, each deleted with every key it
owns (its hash, events, steps, slots, index entries) in one guarded write, so two pruners at
once never take one row twice."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable

from engine.drivers.redis.codec import decode_record, failing_group
from engine.drivers.redis.owned_keys import delete_owned
from engine.drivers.redis.store import Store, Write
from engine.retention import Cutoffs, PruneCount
from schemas.jobs import JobRecord
from schemas.states import JobState

_BATCH = 500


async def _expired(
    store: Store, cutoffs: Cutoffs, tenant_id: str | None
) -> AsyncIterator[tuple[JobRecord, str]]:
    start = 0
    while True:
        ids = await store.zrange(store.keys.settled, start, start + _BATCH - 1)
        if not ids:
            return
        rows = await store.hgetall_many([store.keys.job(i) for i in ids])
        for fields in rows:
            if not fields:
                continue
            job = decode_record(fields)
            if (tenant_id is None or job.tenant_id == tenant_id) and cutoffs.expired(
                job.name, job.state, job.finished_at
            ):
                yield job, fields.get("ver", "")
        start += _BATCH


async def prune_counts(store: Store, cutoffs: Cutoffs, tenant_id: str | None) -> list[PruneCount]:
    return _counted([job async for job, _ in _expired(store, cutoffs, tenant_id)])


async def prune(
    store: Store, cutoffs: Cutoffs, limit: int, tenant_id: str | None
) -> list[PruneCount]:
    doomed: list[tuple[JobRecord, str]] = []
    if limit > 0:
        async for found in _expired(store, cutoffs, tenant_id):
            doomed.append(found)
            if len(doomed) >= limit:
                break
    keys = store.keys
    writes = []
    for job, ver in doomed:
        w = Write()
        w.guard_eq(keys.job(job.id), "ver", ver)
        w.op("!release", keys.job_slots(job.id), keys.slot_prefix, job.id)
        w.op("DEL", keys.job(job.id), keys.events(job.id))
        w.op("DEL", keys.steps(job.run_id), keys.step_positions(job.run_id))
        w.op("ZREM", keys.ids, job.id)
        w.op("ZREM", keys.settled, job.id)
        w.op("SREM", keys.failing, job.id)
        group = failing_group(job.state, job.tenant_id, job.queue)
        w.op("SREM", keys.failing_group(group), job.id)
        await delete_owned(store, w, job.id)
        w.op("!changed", keys.prefix)
        writes.append(w)
    results = await store.apply_many(writes)
    return _counted([job for (job, _), r in zip(doomed, results, strict=True) if r >= 0])


def _counted(jobs: Iterable[JobRecord]) -> list[PruneCount]:
    counts: dict[tuple[JobState, str], int] = {}
    for job in jobs:
        key = (job.state, job.queue)
        counts[key] = counts.get(key, 0) + 1
    return [PruneCount(state, queue, n) for (state, queue), n in sorted(counts.items())]
