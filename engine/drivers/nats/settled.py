"""Settled counts (engine/settled_counts.py): the replica, once synced, holds every stored job,
so the counts are `settled_counts.tally` over it — no server reads beyond the sync."""

from __future__ import annotations

from engine.drivers.nats.store import Store
from engine.settled_counts import tally
from schemas.stats import SettledCount


async def settled_counts(
    store: Store, since_ms: int, until_ms: int, tenant_id: str | None
) -> dict[str, SettledCount]:
    await store.replica.sync()
    return tally((doc.record for _, doc in store.replica.docs()), since_ms, until_ms, tenant_id)
