"""Events of no job on Redis: kept in `P jobless` by their `at`, so the pruner deletes a range
of it; the ones an earlier build kept in `P ev:` (by sequence) are moved there by migrate."""

from __future__ import annotations

from typing import Any, cast

import pytest

from engine import Jobs, ManualClock
from schemas.events import EventRecord

pytest.importorskip("redis", reason="the redis extra is not installed")

from engine.drivers.redis import RedisDriver
from engine.drivers.redis.store import Store


def _store(driver: RedisDriver) -> Store:
    return cast(Store, driver._store)  # pyright: ignore[reportPrivateUsage]


async def test_events_an_earlier_build_kept_by_sequence_are_moved_by_migrate(
    jobs: Jobs, clock: ManualClock
) -> None:
    driver = cast(RedisDriver, jobs.driver)
    store = _store(driver)
    client: Any = store.client
    keys = store.keys
    now = clock.now_ms()
    # As an earlier build wrote them: "<seq>|<json>" in P ev: scored by the sequence.
    old = {
        f"{seq}|{EventRecord(job_id=None, at=at, kind='mcp.call').model_dump_json()}": seq
        for seq, at in ((7, now - 10), (8, now + 10), (9, now - 20))
    }
    await client.zadd(keys.events(None), old)
    await driver.record_event(EventRecord(job_id=None, at=now - 5, kind="mcp.call"))
    assert await driver.count_jobless_events(now) == 1
    await driver.migrate()
    assert not await client.exists(keys.events(None))
    assert await driver.count_jobless_events(now) == 3
    assert await driver.forget_jobless_events(now, 2) == 2  # the two oldest: -20, -10
    assert await driver.count_jobless_events(now - 5) == 0
    assert await driver.count_jobless_events(now + 11) == 2
    await driver.migrate()  # nothing left to move: unchanged
    assert await driver.count_jobless_events(now + 11) == 2
