"""A job whose value has no room left for the `lease_expired` event is still taken over when its
lease runs out (rule 13): a crashed worker loses nothing, only the history misses that line, and
the worker's log says so."""

from __future__ import annotations

from typing import cast

import pytest
from pydantic import BaseModel

from engine import JobContext, JobRegistry, Jobs, ManualClock, job
from engine.lease_expiry import LEASE_EXPIRED

pytest.importorskip("nats", reason="the nats extra is not installed")

from engine.drivers.nats.connection import TooLarge
from engine.drivers.nats.store import Store

LEASE_MS = 30_000


class Item(BaseModel):
    n: int


async def test_a_takeover_with_no_room_for_its_event_still_takes_the_job(
    jobs: Jobs,
    registry: JobRegistry,
    clock: ManualClock,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    @job(idempotency_key=lambda i: f"i:{i.n}", registry=registry)
    async def work(input: Item, ctx: JobContext) -> None:
        return None

    r = await jobs.enqueue(work, {"n": 1})
    assert len(await jobs.driver.claim("vanished", 1, lease_ms=LEASE_MS)) == 1
    store = cast(Store, jobs.driver._store)  # type: ignore[attr-defined]
    fits = store.check_size

    def no_room_for_the_event(key: str, raw: bytes, room: int = 0) -> None:
        if LEASE_EXPIRED.encode() in raw:
            raise TooLarge(key, len(raw), len(raw) - 1, store.client.max_payload)
        fits(key, raw, room)

    monkeypatch.setattr(store, "check_size", no_room_for_the_event)
    clock.advance(LEASE_MS)
    (taken,) = await jobs.driver.claim("rescuer", 1, lease_ms=LEASE_MS)

    assert (taken.record.id, taken.record.attempt, taken.record.worker_id) == (r.id, 2, "rescuer")
    assert (await jobs.trace(r.id)).events == []
    assert any(
        r.id in rec.getMessage() and "without its lease_expired event" in rec.getMessage()
        for rec in caplog.records
    )
