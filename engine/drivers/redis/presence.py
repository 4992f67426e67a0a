"""Workers' presence rows: one hash field per worker; a beat deletes a few expired others."""

from __future__ import annotations

from engine.drivers.damage import UNDECODABLE, readable
from engine.drivers.redis.store import Store, Write
from engine.presence import EXPIRED_PER_BEAT, is_expired
from schemas.stats import WorkerInfo


async def worker_seen(store: Store, info: WorkerInfo) -> tuple[bool, str | None]:
    """Write `info`'s beat; answer whether the store's version key is there and its epoch
    token, read in the same round trip as the rows (lost.LostJobs.look)."""
    now = store.clock.now_ms()
    keys = store.keys
    pipe = store.client.pipeline(transaction=False)
    pipe.hgetall(keys.workers)
    pipe.exists(keys.version)
    pipe.get(keys.epoch)
    rows, there, epoch = await pipe.execute()
    w = Write()
    expired = [
        (worker_id, text)
        for worker_id, text in rows.items()
        if worker_id != info.id and _expired(text, now)
    ]
    for worker_id, text in expired[:EXPIRED_PER_BEAT]:
        # Only the row as read: a worker that beat meanwhile is alive again and stays.
        w.op("!hdel_if", store.keys.workers, worker_id, text, store.keys.workerorder)
    w.op("HSET", store.keys.workers, info.id, info.model_dump_json())
    w.op("!zadd_seq", store.keys.workerorder, store.keys.workerseq, info.id)
    await store.apply(w)
    return bool(there), epoch


async def worker_gone(store: Store, worker_id: str) -> None:
    pipe = store.client.pipeline(transaction=True)
    pipe.hdel(store.keys.workers, worker_id)
    pipe.zrem(store.keys.workerorder, worker_id)
    await pipe.execute()


async def live_workers(store: Store, seen_since: int) -> list[WorkerInfo]:
    pipe = store.client.pipeline(transaction=False)
    pipe.hgetall(store.keys.workers)
    pipe.zrange(store.keys.workerorder, 0, -1)
    rows, order = await pipe.execute()
    # First beat first, as the SQL drivers list them.
    rank = {worker_id: n for n, worker_id in enumerate(order)}
    ids = sorted(rows, key=lambda i: (rank.get(i, len(rank)), i))
    where = f"in {store.keys.workers}"
    infos = readable(
        ids, lambda i: WorkerInfo.model_validate_json(rows[i]), lambda i: f"worker {i!r} {where}"
    )
    return [w for w in infos if w.last_seen_at >= seen_since]


def _expired(text: str, now: int) -> bool:
    """Past its time, or not a row a worker wrote (a live worker's own beat writes its row
    anew, so deleting such a row loses nothing)."""
    try:
        seen = WorkerInfo.model_validate_json(text).last_seen_at
    except UNDECODABLE:
        return True
    return is_expired(seen, now)
