"""The backfill ledger: one hash field per run, read newest first."""

from __future__ import annotations

from engine.drivers.base import RunPosition
from engine.drivers.damage import UNDECODABLE, UndecodableRow
from engine.drivers.redis.store import Store, Write
from schemas.backfill import BackfillRun
from schemas.states import BackfillStatus


async def backfill_save(store: Store, run: BackfillRun) -> None:
    w = Write()
    w.op("HSET", store.keys.backfills, run.run_id, run.model_dump_json())
    w.op("!changed", store.keys.prefix)  # in the same script: no round trip added
    await store.apply(w)


async def backfill_runs(
    store: Store,
    name: str | None,
    environment: str | None,
    status: BackfillStatus | None,
    before: RunPosition | None,
    limit: int | None,
) -> list[BackfillRun]:
    texts = await store.hgetall(store.keys.backfills)
    runs = [
        r
        for r in (_run(run_id, text) for run_id, text in texts.items())
        if (name is None or r.name == name)
        and (environment is None or r.environment == environment)
        and (status is None or r.status == status)
        and (before is None or (r.started_at, r.run_id) < before)
    ]
    runs.sort(key=lambda r: (r.started_at, r.run_id), reverse=True)
    return runs if limit is None else runs[:limit]


def _run(run_id: str, text: str) -> BackfillRun:
    try:
        return BackfillRun.model_validate_json(text)
    except UNDECODABLE as exc:
        raise UndecodableRow("", exc, "backfill", run_id=run_id) from exc
