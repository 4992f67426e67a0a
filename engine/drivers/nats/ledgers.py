"""The backfill ledger: one key per run, listed from the replica after a sync."""

from __future__ import annotations

from engine.drivers.base import RunPosition
from engine.drivers.damage import UNDECODABLE
from engine.drivers.nats import keys
from engine.drivers.nats.codec import dumps, loads
from engine.drivers.nats.store import Store
from schemas.backfill import BackfillRun
from schemas.states import BackfillStatus


async def backfill_save(store: Store, run: BackfillRun) -> None:
    raw = dumps(run.model_dump(mode="json"))
    revision = await store.kv.put(keys.backfill(run.run_id), raw)
    store.replica.apply(keys.backfill(run.run_id), revision, raw)


async def backfill_runs(
    store: Store,
    name: str | None,
    environment: str | None,
    status: BackfillStatus | None,
    before: RunPosition | None,
    limit: int | None,
) -> list[BackfillRun]:
    await store.replica.sync()
    runs = [_run(store, key, e.raw) for key, e in store.replica.family("bf")]
    runs = [
        r
        for r in runs
        if (name is None or r.name == name)
        and (environment is None or r.environment == environment)
        and (status is None or r.status == status)
        and (before is None or (r.started_at, r.run_id) < before)
    ]
    runs.sort(key=lambda r: (r.started_at, r.run_id), reverse=True)
    return runs if limit is None else runs[:limit]


def _run(store: Store, key: str, raw: bytes) -> BackfillRun:
    """A run of the ledger; STORE_DAMAGED for a value the driver did not write, never a run left
    out (a ledger that forgets a run would let a backfill run again)."""
    try:
        return BackfillRun.model_validate(loads(raw))
    except UNDECODABLE as exc:
        raise store.damaged(key, exc, keys.named(key, "backfill run")) from exc
