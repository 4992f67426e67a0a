"""The keys the optional capabilities add for one job (earlier runs' steps, its waiter row, its
rate reservation), deleted by retention in the job's own guarded write. Read just before that
write: a settled job gains none of them until an operator moves it, which moves its write
counter and fails the write's guard."""

from __future__ import annotations

import json
from typing import cast

from engine.drivers.redis.store import Store, Write


async def delete_owned(store: Store, w: Write, job_id: str) -> None:
    keys = store.keys
    pipe = store.client.pipeline(transaction=False)
    pipe.smembers(keys.job_runs(job_id))
    pipe.hget(keys.waiters, job_id)
    pipe.get(keys.reservation(job_id))
    runs, target, reservation = cast(
        tuple[set[str], str | None, str | None], tuple(await pipe.execute())
    )
    for run_id in sorted(runs):
        w.op("DEL", keys.steps(run_id), keys.step_positions(run_id))
    w.op("DEL", keys.job_runs(job_id))
    if target is not None:
        w.op("HDEL", keys.waiters, job_id)
        w.op("SREM", keys.waiting(target), job_id)
    if reservation is not None:
        rate_keys = json.loads(reservation)[4]
        w.op("DEL", keys.reservation(job_id))
        w.op("ZREM", keys.reservations_by_slot, job_id)
        w.op("ZREM", keys.reservations_by_late, job_id)
        w.op("ZREM", keys.adoptable(rate_keys), job_id)
