"""Events of no job on NATS: `evx.` keys named by their `at`, so the pruner finds the old ones
by key name; an earlier build named them by wall-clock time, so `at` itself decides."""

from __future__ import annotations

from typing import cast

import pytest

from engine import Jobs, ManualClock
from engine.ids import new_id
from schemas.events import EventRecord

pytest.importorskip("nats", reason="the nats extra is not installed")

from engine.drivers.nats import NatsDriver, keys
from engine.drivers.nats.codec import dumps


async def test_an_event_is_named_by_its_at_and_a_misnamed_young_one_is_kept(
    jobs: Jobs, clock: ManualClock
) -> None:
    driver = cast(NatsDriver, jobs.driver)
    store = await driver._open()  # pyright: ignore[reportPrivateUsage]
    now = clock.now_ms()
    await driver.record_event(EventRecord(job_id=None, at=now - 10, kind="mcp.call"))
    (key,) = [k for k, _ in store.replica.family("evx")]
    assert key.startswith(keys.loose_events_before(now - 10)) and len(key) == len("evx.") + 32
    # Named long before its `at`, as an earlier build's clock might have: kept while young.
    young = EventRecord(job_id=None, at=now, kind="mcp.call")
    await store.write(keys.loose_event(0, new_id()), dumps(young.model_dump(mode="json")), 0)
    assert await driver.count_jobless_events(now) == 1
    assert await driver.forget_jobless_events(now, 10) == 1
    await store.replica.sync()
    assert [k for k, _ in store.replica.family("evx")] != [key]  # the misnamed one is left
    assert len(store.replica.family("evx")) == 1
    assert await driver.count_jobless_events(now + 1) == 1
    assert await driver.forget_jobless_events(now + 1, 10) == 1
