"""Change signals on Redis (engine/drivers/redis/changes.py): a write in one process moves the
shared counter and wakes a follower in another; nothing is counted while nobody follows.

Every wait is bounded by `anyio.fail_after`; the follower's own timeout is on a ManualClock that
never moves, so only the signal can end it."""

from __future__ import annotations

from typing import cast

import anyio

from engine import JobRegistry, Jobs, ManualClock, Worker, connect
from engine.drivers.base import CHANGES, ChangeSource, require
from engine.drivers.redis import RedisDriver
from engine.testing.blocked import wait_all_tasks_blocked
from tests.mcp.support import declare_app

WAIT_S = 10  # a bound on every wait, never a pause
FOREVER_MS = 3_600_000  # on the manual clock: only a change ends the wait


async def _counter(driver: RedisDriver) -> str | None:
    return cast(str | None, await driver._store.client.get(driver._store.keys.change_count))


async def _follow(source: ChangeSource, seen: int, into: list[int]) -> None:
    into.append(await source.wait_for_change(seen, FOREVER_MS))


async def test_a_write_elsewhere_wakes_a_follower_and_moves_the_count(
    database_url: str, clock: ManualClock, registry: JobRegistry
) -> None:
    declare_app(registry)  # its "greet" job
    writer = await connect(database_url, clock=clock, registry=registry)
    follower = await connect(database_url, clock=clock, registry=JobRegistry())
    try:
        source = require(follower.driver, CHANGES)
        # Nobody follows yet: a write counts nothing and signals nobody.
        await writer.enqueue("greet", {"user_id": 1})
        assert await _counter(cast(RedisDriver, writer.driver)) is None
        with anyio.fail_after(WAIT_S):
            baseline = await source.wait_for_change(-1, FOREVER_MS)  # at once: subscribes
        assert baseline == 0

        for write in ("enqueue", "claim and ack"):
            async with anyio.create_task_group() as tg:
                moved: list[int] = []
                tg.start_soon(_follow, source, baseline, moved)
                await wait_all_tasks_blocked()
                assert not moved
                with anyio.fail_after(WAIT_S):
                    if write == "enqueue":
                        await writer.enqueue("greet", {"user_id": 2})
                    else:
                        await Worker(writer).run_until_idle()
            assert moved and moved[0] > baseline, write
            baseline = moved[0]
        assert int(await _counter(cast(RedisDriver, writer.driver)) or 0) == baseline

        # A count already past `seen` is answered at once, without waiting.
        with anyio.fail_after(WAIT_S):
            assert await source.wait_for_change(0, FOREVER_MS) == baseline
    finally:
        await follower.close()
        await writer.close()


async def test_a_wait_with_no_change_ends_at_its_timeout(jobs: Jobs, clock: ManualClock) -> None:
    source = require(jobs.driver, CHANGES)
    with anyio.fail_after(WAIT_S):
        seen = await source.wait_for_change(-1, 1_000)
    async with anyio.create_task_group() as tg:
        answers: list[int] = []

        async def follow() -> None:
            answers.append(await source.wait_for_change(seen, 1_000))

        tg.start_soon(follow)
        await wait_all_tasks_blocked()
        assert not answers
        with anyio.fail_after(WAIT_S):
            while not answers:
                # The follower may still be reading the count (a task awaiting the server
                # counts as blocked) and start its timer after the clock moved: move it again.
                clock.advance(1_000)
                await wait_all_tasks_blocked()
    assert answers == [seen]
