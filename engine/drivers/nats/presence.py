"""Workers' presence rows: one key per worker, read from the replica after a sync."""

from __future__ import annotations

from engine.drivers.damage import UNDECODABLE, readable
from engine.drivers.nats import keys
from engine.drivers.nats.codec import dumps, loads
from engine.drivers.nats.replica import Entry
from engine.drivers.nats.store import Store
from engine.ids import new_id
from engine.presence import EXPIRED_PER_BEAT, is_expired
from schemas.stats import WorkerInfo


async def worker_seen(store: Store, info: WorkerInfo) -> None:
    now = store.clock.now_ms()

    def beat(raw: bytes | None) -> bytes:
        # `first` keeps the first beat's place: workers are listed first beat first.
        first = _first(raw) or new_id()
        return dumps({"info": info.model_dump(mode="json"), "first": first})

    await store.change_key(keys.worker(info.id), beat)
    expired = [
        (key, entry)
        for key, entry in store.replica.family("wk")
        if key != keys.worker(info.id) and _expired(entry.raw, now)
    ]
    for key, entry in expired[:EXPIRED_PER_BEAT]:
        await store.delete(key, entry.revision)  # a conflict: it beat again meanwhile


async def worker_gone(store: Store, worker_id: str) -> None:
    await store.kv.delete(keys.worker(worker_id))


async def live_workers(store: Store, seen_since: int) -> list[WorkerInfo]:
    await store.replica.sync()
    rows = readable(store.replica.family("wk"), _decode, lambda pair: keys.named(pair[0], "worker"))
    return [info for _, info in sorted(rows, key=lambda r: r[0]) if info.last_seen_at >= seen_since]


def _decode(pair: tuple[str, Entry]) -> tuple[str, WorkerInfo]:
    row = loads(pair[1].raw)
    return str(row["first"]), WorkerInfo.model_validate(row["info"])


def _first(raw: bytes | None) -> str | None:
    """The first beat's place in a worker's own row; None for a row it cannot read."""
    try:
        return None if raw is None else str(loads(raw)["first"])
    except UNDECODABLE:
        return None


def _expired(raw: bytes, now: int) -> bool:
    """Past its time, or not a row a worker wrote (a live worker's own beat writes its row
    anew, so deleting such a row loses nothing)."""
    try:
        return is_expired(int(loads(raw)["info"]["last_seen_at"]), now)
    except UNDECODABLE:
        return True
