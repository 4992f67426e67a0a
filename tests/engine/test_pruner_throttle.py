"""The pruner's pause between batches: on the injected clock, configurable, 0 for none, and
ended early by a stop. Every wait here is bounded; the clock moves only when the test moves it."""

from __future__ import annotations

import anyio
import pytest

from engine import JobRegistry, Jobs, connect
from engine.clock import ManualClock
from engine.errors import InvalidArgumentError
from engine.pruner import DEFAULT_PAUSE_MS, Pruner, prune_all
from engine.retention import DAY_MS, DEFAULT_POLICY, plan
from engine.testing.blocked import wait_all_tasks_blocked
from engine.testing.kit.test_retention import settle


class WatchedClock(ManualClock):
    """A manual clock that tells the test each time someone starts sleeping on it."""

    def __init__(self) -> None:
        super().__init__()
        self.sleeps: list[int] = []
        self.slept = anyio.Event()

    async def sleep_ms(self, ms: int) -> None:
        self.sleeps.append(ms)
        self.slept.set()
        self.slept = anyio.Event()
        await super().sleep_ms(ms)


async def _jobs_with_expired(clock: ManualClock, n: int) -> Jobs:
    jobs = await connect("memory://", clock=clock, registry=JobRegistry())
    for _ in range(n):
        await settle(jobs.driver, "done")
    clock.advance(8 * DAY_MS)
    return jobs


async def _remaining(jobs: Jobs, clock: ManualClock) -> int:
    counts = await jobs.driver.prune_counts(plan(DEFAULT_POLICY, clock.now_ms()))
    return sum(c.rows for c in counts)


async def test_a_pass_pauses_on_the_clock_between_batches_and_not_after_the_last() -> None:
    clock = WatchedClock()
    jobs = await _jobs_with_expired(clock, 12)
    try:
        pruner = Pruner(jobs, holder="w1", batch_size=5, pause_ms=40, environ={})
        async with anyio.create_task_group() as tg:
            tg.start_soon(pruner.pass_once)
            with anyio.fail_after(5):
                await clock.slept.wait()
                assert await _remaining(jobs, clock) == 7  # one batch, then the pause
                clock.advance(39)
                await wait_all_tasks_blocked()
                assert await _remaining(jobs, clock) == 7  # still pausing
                waiting = clock.slept
                clock.advance(1)
                await waiting.wait()
                assert await _remaining(jobs, clock) == 2
                clock.advance(40)  # the third batch comes back short: no pause after it
        assert await _remaining(jobs, clock) == 0
        assert clock.sleeps == [40, 40]
    finally:
        await jobs.close()


async def test_pause_zero_only_yields_and_needs_no_clock() -> None:
    clock = WatchedClock()
    jobs = await _jobs_with_expired(clock, 12)
    try:
        pruner = Pruner(jobs, holder="w1", batch_size=5, pause_ms=0, environ={})
        with anyio.fail_after(5):
            report = await pruner.pass_once()
        assert report.batches == 3 and report.by_state()["done"] == 12
        assert clock.sleeps == []
    finally:
        await jobs.close()


async def test_stop_ends_a_pause_and_the_pass() -> None:
    clock = WatchedClock()
    jobs = await _jobs_with_expired(clock, 12)
    try:
        pruner = Pruner(jobs, holder="w1", batch_size=5, pause_ms=60_000, environ={})
        reports = []

        async def one_pass() -> None:
            reports.append(await pruner.pass_once())

        async with anyio.create_task_group() as tg:
            tg.start_soon(one_pass)
            with anyio.fail_after(5):
                await clock.slept.wait()
                pruner.stop()
        assert reports[0].batches == 1 and reports[0].by_state()["done"] == 5
    finally:
        await jobs.close()


async def test_prune_all_pauses_only_when_asked() -> None:
    clock = WatchedClock()
    jobs = await _jobs_with_expired(clock, 12)
    try:
        cutoffs = plan(DEFAULT_POLICY, clock.now_ms())
        with anyio.fail_after(5):
            _, batches, more = await prune_all(jobs, cutoffs, batch_size=5, max_batches=1)
        assert (batches, more, clock.sleeps) == (1, True, [])
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: prune_all(jobs, cutoffs, batch_size=5, pause_ms=30))
            with anyio.fail_after(5):
                await clock.slept.wait()
                clock.advance(30)
        assert clock.sleeps == [30]
        assert await _remaining(jobs, clock) == 0
    finally:
        await jobs.close()


async def test_the_default_pauses_and_a_bad_pause_is_refused() -> None:
    clock = ManualClock()
    jobs = await connect("memory://", clock=clock, registry=JobRegistry())
    try:
        assert DEFAULT_PAUSE_MS > 0
        assert Pruner(jobs, environ={}).pause_ms == DEFAULT_PAUSE_MS
        with pytest.raises(InvalidArgumentError):
            Pruner(jobs, pause_ms=-1, environ={})
        with pytest.raises(InvalidArgumentError):
            await prune_all(jobs, plan(DEFAULT_POLICY, clock.now_ms()), pause_ms=-1)
    finally:
        await jobs.close()
