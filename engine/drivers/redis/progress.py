"""Progress (engine/progress.py) on Redis: the record's `progress` field, written by a guarded
write fenced on the holder's token (rule 13), so a stale holder changes nothing."""

from __future__ import annotations

from engine.drivers.redis.codec import dumps
from engine.drivers.redis.store import Store, Write
from engine.drivers.redis.transitions import held_by
from schemas.progress import Progress


async def save_progress(store: Store, job_id: str, token: str, progress: Progress) -> bool:
    w = Write()
    held_by(w, store.keys, job_id, token)
    w.op("HSET", store.keys.job(job_id), "progress", dumps(progress.model_dump(mode="json")))
    # The write counter moves, so an operator's write computed from an older read reads again.
    w.op("HINCRBY", store.keys.job(job_id), "ver", 1)
    w.op("!changed", store.keys.prefix)
    return await store.apply(w) >= 0
