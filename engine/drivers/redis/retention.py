"""Retention: settled rows walked oldest `finished_at` first, each deleted with every key it
owns (its hash, events, steps, slots, index entries) in one guarded write, so two pruners at
once never take one row twice."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterable
from typing import NamedTuple

from engine.drivers.redis.codec import failing_group, job_state
from engine.drivers.redis.owned_keys import delete_owned
from engine.drivers.redis.store import Store, Write
from engine.drivers.redis.transitions import leave_group
from engine.retention import Cutoffs, PruneCount
from schemas.states import JobState

_BATCH = 500


class _Expiring(NamedTuple):
    """What a prune reads of a settled row (not the whole record)."""

    id: str
    run_id: str
    name: str
    state: JobState
    queue: str
    tenant_id: str | None
    finished_at: int | None


_FIELDS = ("run_id", "name", "state", "q", "tenant_id", "finished_at", "ver")


async def _expired(
    store: Store, cutoffs: Cutoffs, tenant_id: str | None
) -> AsyncIterator[tuple[_Expiring, str]]:
    # Rows finished at or after the latest cutoff are kept by every rule: not read.
    latest = cutoffs.latest()
    if latest is None:
        return
    start = 0
    while True:
        ids = await store.zrangebyscore(store.keys.settled, f"({latest}", start, _BATCH)
        if not ids:
            return
        pipe = store.client.pipeline(transaction=False)
        for i in ids:
            pipe.hmget(store.keys.job(i), _FIELDS)
        for job_id, values in zip(ids, await pipe.execute(), strict=True):
            if values[0] is None:
                continue
            run_id, name, state, queue, tenant, finished, ver = values
            row = _Expiring(
                job_id,
                json.loads(run_id),
                json.loads(name),
                job_state(state),
                queue,
                json.loads(tenant),
                json.loads(finished),
            )
            if (tenant_id is None or row.tenant_id == tenant_id) and cutoffs.expired(
                row.name, row.state, row.finished_at
            ):
                yield row, ver or ""
        start += _BATCH


async def prune_counts(store: Store, cutoffs: Cutoffs, tenant_id: str | None) -> list[PruneCount]:
    return _counted([job async for job, _ in _expired(store, cutoffs, tenant_id)])


async def prune(
    store: Store, cutoffs: Cutoffs, limit: int, tenant_id: str | None
) -> list[PruneCount]:
    doomed: list[tuple[_Expiring, str]] = []
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
        w.op("ZREM", keys.by_name(job.name), job.id)
        if job.tenant_id is not None:
            w.op("ZREM", keys.by_tenant(job.tenant_id), job.id)
        w.op("ZREM", keys.by_queue(job.queue), job.id)
        w.op("ZREM", keys.settled, job.id)
        w.op("SREM", keys.failing, job.id)
        leave_group(w, keys, failing_group(job.state, job.tenant_id, job.queue), job.id)
        await delete_owned(store, w, job.id)
        w.op("!changed", keys.prefix)
        writes.append(w)
    results = await store.apply_many(writes)
    return _counted([job for (job, _), r in zip(doomed, results, strict=True) if r >= 0])


def _counted(jobs: Iterable[_Expiring]) -> list[PruneCount]:
    counts: dict[tuple[JobState, str], int] = {}
    for job in jobs:
        key = (job.state, job.queue)
        counts[key] = counts.get(key, 0) + 1
    return [PruneCount(state, queue, n) for (state, queue), n in sorted(counts.items())]
