"""A worker's presence beat the database refused (an outage) is tried again within a second,
not a whole beat (10 s) later: a worker that rode out an outage counted as gone, and a diagnosis
said NO_LIVE_WORKERS, for up to ten seconds after the database came back."""

from __future__ import annotations

from itertools import pairwise

import anyio

from engine import JobRegistry, Jobs, ManualClock
from engine.driver_errors import DriverUnavailableError
from engine.drivers.memory import MemoryDriver
from engine.testing.blocked import wait_all_tasks_blocked
from engine.worker_presence import FAST_RETRIES_MS, PRESENCE_MS, RETRY_BEAT_MS, Presence
from schemas.stats import WorkerInfo


async def test_a_refused_beat_is_tried_again_within_a_second(clock: ManualClock) -> None:
    driver = MemoryDriver(clock)
    jobs = Jobs(driver, registry=JobRegistry(), clock=clock)
    taken: list[int] = []
    refusing = True
    seen = driver.worker_seen

    async def worker_seen(info: WorkerInfo) -> None:
        if refusing:
            raise DriverUnavailableError("memory", "the database is away")
        taken.append(clock.now_ms())
        await seen(info)

    driver.worker_seen = worker_seen  # type: ignore[method-assign]
    presence = Presence(jobs, "w1", lambda: None, 4, None, None)
    start = clock.now_ms()
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(presence.run)
            await wait_all_tasks_blocked()
            for _ in range(3):  # the outage: a beat refused each second
                clock.advance(RETRY_BEAT_MS)
                await wait_all_tasks_blocked()
            refusing = False  # the database is back
            clock.advance(RETRY_BEAT_MS)
            await wait_all_tasks_blocked()
            assert taken == [start + 4 * RETRY_BEAT_MS]
            assert presence.checked_in.is_set()
            clock.advance(RETRY_BEAT_MS)  # taken: the next beat keeps its own pace
            await wait_all_tasks_blocked()
            assert len(taken) == 1
            clock.advance(PRESENCE_MS)
            await wait_all_tasks_blocked()
            assert len(taken) == 2
            tg.cancel_scope.cancel()


async def test_a_long_outage_is_tried_at_the_beats_own_pace(clock: ManualClock) -> None:
    """Past a minute of refusals, a beat every PRESENCE_MS again: a worker does not knock
    on a database away for hours every second."""
    driver = MemoryDriver(clock)
    jobs = Jobs(driver, registry=JobRegistry(), clock=clock)
    tried: list[int] = []

    async def worker_seen(info: WorkerInfo) -> None:
        tried.append(clock.now_ms())
        raise DriverUnavailableError("memory", "the database is away")

    driver.worker_seen = worker_seen  # type: ignore[method-assign]
    presence = Presence(jobs, "w1", lambda: None, 4, None, None)
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(presence.run)
            await wait_all_tasks_blocked()
            while clock.now_ms() - tried[0] < FAST_RETRIES_MS + 3 * PRESENCE_MS:
                clock.advance(RETRY_BEAT_MS)
                await wait_all_tasks_blocked()
            tg.cancel_scope.cancel()
    gaps = {b - a for a, b in pairwise(tried)}
    assert gaps == {RETRY_BEAT_MS, PRESENCE_MS}
    assert tried[-1] - tried[-2] == PRESENCE_MS
