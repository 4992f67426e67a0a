"""Workers' presence rows: one key per worker, read from the replica after a sync."""

from __future__ import annotations

from engine.drivers.nats import keys
from engine.drivers.nats.codec import dumps, loads
from engine.drivers.nats.store import Store
from engine.ids import new_id
from engine.presence import EXPIRED_PER_BEAT, is_expired
from schemas.stats import WorkerInfo


async def worker_seen(store: Store, info: WorkerInfo) -> None:
    now = store.clock.now_ms()

    def beat(raw: bytes | None) -> bytes:
        # `first` keeps the first beat's place: workers are listed first beat first.
        first = new_id() if raw is None else loads(raw)["first"]
        return dumps({"info": info.model_dump(mode="json"), "first": first})

    await store.change_key(keys.worker(info.id), beat)
    expired = [
        (key, entry)
        for key, entry in store.replica.family("wk")
        if key != keys.worker(info.id) and is_expired(loads(entry.raw)["info"]["last_seen_at"], now)
    ]
    for key, entry in expired[:EXPIRED_PER_BEAT]:
        await store.delete(key, entry.revision)  # a conflict: it beat again meanwhile


async def worker_gone(store: Store, worker_id: str) -> None:
    await store.kv.delete(keys.worker(worker_id))


async def live_workers(store: Store, seen_since: int) -> list[WorkerInfo]:
    await store.replica.sync()
    rows = sorted((loads(e.raw) for _, e in store.replica.family("wk")), key=lambda r: r["first"])
    found = [WorkerInfo.model_validate(row["info"]) for row in rows]
    return [w for w in found if w.last_seen_at >= seen_since]
