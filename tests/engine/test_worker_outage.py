"""A running worker through a database outage (engine/worker_outage.py): its claims back off from
the poll interval doubling to 30 s, its loops log one warning when the database goes away (and a
reminder every 5 minutes), and one line when it answers again; the claims resume promptly then.
Before, every failed claim logged a warning and was tried again after the poll: 66 lines a
minute for as long as the outage lasted."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from itertools import pairwise

import anyio
import pytest
from anyio.lowlevel import checkpoint

from engine import JobContext, JobRegistry, Jobs, ManualClock, Worker, job
from engine.driver_errors import DriverUnavailableError
from engine.drivers.memory import MemoryDriver
from engine.testing.blocked import wait_all_tasks_blocked
from schemas.descriptor import JobDescriptor
from schemas.jobs import ClaimedJob
from schemas.stats import WorkerInfo
from tests.support.worker_jobs import Item

AWAY = DriverUnavailableError("memory", "connection refused")
MINUTE = 60_000
# The longest wait between two claims, and how often an outage is recalled (worker_outage.py).
BACKOFF_MAX_MS = 30_000
REMIND_MS = 5 * MINUTE


class SteppedClock(ManualClock):
    def next_due(self) -> int:
        """When the next sleeper on this clock wakes."""
        return min(due for due, _ in self._sleepers)


class AwayDriver(MemoryDriver):
    """A database that can go away: while `away`, its claims, presence beats and descriptor
    publishes raise DRIVER_UNAVAILABLE. `claims` holds when each claim was tried, and whether
    it failed."""

    def __init__(self, clock: ManualClock) -> None:
        super().__init__(clock)
        self.away = False
        self.claims: list[tuple[int, bool]] = []

    def _check(self) -> None:
        if self.away:
            raise AWAY

    async def claim(
        self, worker_id: str, limit: int, lease_ms: int, queues: Sequence[str] | None = None
    ) -> list[ClaimedJob]:
        self.claims.append((self.clock.now_ms(), self.away))
        self._check()
        return await super().claim(worker_id, limit, lease_ms, queues)

    async def worker_seen(self, info: WorkerInfo) -> None:
        self._check()
        await super().worker_seen(info)

    async def publish_descriptors(
        self, worker_id: str, descriptors: Sequence[JobDescriptor], now: int
    ) -> None:
        self._check()
        await super().publish_descriptors(worker_id, descriptors, now)


def _said(caplog: pytest.LogCaptureFixture, level: int) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == level]


async def _step_until(clock: SteppedClock, until_ms: int, driver: AwayDriver) -> None:
    """Move the clock from one sleeper's wake-up to the next until `until_ms`. Bounded: a
    worker that tries its claims every poll runs out of steps and fails the count below."""
    for _ in range(400):
        for _ in range(20):
            await checkpoint()  # the woken run first: a look that finds one runnable costs 0.1 s
        await wait_all_tasks_blocked()
        due = clock.next_due()
        if due > until_ms:
            clock.set(until_ms)
            await wait_all_tasks_blocked()
            return
        clock.set(due)
    raise AssertionError(f"the worker woke more than 400 times: {len(driver.claims)} claims")


async def test_a_worker_through_a_long_outage_backs_off_says_so_once_and_resumes(
    registry: JobRegistry, caplog: pytest.LogCaptureFixture
) -> None:
    clock = SteppedClock()
    driver = AwayDriver(clock)
    jobs = Jobs(driver, registry=registry, clock=clock)
    ran: list[int] = []

    @job(name="charge", idempotency_key=lambda i: str(i.n), registry=registry)
    async def charge(item: Item, ctx: JobContext) -> None:
        ran.append(item.n)

    # A long lease: fewer heartbeat wake-ups to step through (they are quiet either way).
    worker = Worker(
        jobs, concurrency=1, lease_ms=10 * MINUTE, scheduler=False, outbox_relay=False, prune=False
    )
    caplog.set_level(logging.DEBUG, logger="mcp_jobs")
    with anyio.fail_after(60):
        run = asyncio.create_task(worker.run())
        await _step_until(clock, clock.now_ms() + 2_000, driver)  # up and idle
        assert driver.claims and not any(failed for _, failed in driver.claims)
        caplog.clear()

        driver.away = True
        went_away = clock.now_ms()
        await _step_until(clock, went_away + 10 * MINUTE, driver)
        tried = [at for at, failed in driver.claims if failed]
        gaps = [b - a for a, b in pairwise(tried)]
        # The poll interval doubling to 30 s: not one claim every 500 ms (1,200 in 10 minutes).
        assert gaps[:7] == [500, 1_000, 2_000, 4_000, 8_000, 16_000, 30_000], gaps
        assert set(gaps[7:]) == {BACKOFF_MAX_MS}, gaps
        assert len(tried) <= 30
        # One warning when it went away and a reminder 5 minutes on (the next falls just past
        # these 10); nothing at INFO meanwhile.
        warnings = _said(caplog, logging.WARNING)
        assert len(warnings) == 10 * MINUTE // REMIND_MS, warnings
        assert "DRIVER_UNAVAILABLE" in warnings[0], warnings
        assert all("still" in line for line in warnings[1:]), warnings
        assert _said(caplog, logging.INFO) == []
        caplog.clear()

        # Back just after a claim failed, so its next try is 30 s away.
        tries = len(driver.claims)
        while len(driver.claims) == tries:
            await _step_until(clock, clock.next_due(), driver)
        driver.away = False
        back = clock.now_ms()
        caplog.clear()
        await _step_until(clock, back + 10_000, driver)
        # Within the presence beat's 10 s, before the claim's 30 s wait was out: the beat that
        # succeeds again cuts it short.
        last_failed = max(at for at, failed in driver.claims if failed)
        resumed = min(at for at, failed in driver.claims if at >= back and not failed)
        assert resumed - back <= 10_000 and resumed < last_failed + BACKOFF_MAX_MS
        assert not any(failed for at, failed in driver.claims if at > back)
        enqueued = await jobs.enqueue(charge, Item(n=1))
        await _step_until(clock, clock.now_ms() + 1_000, driver)
        assert ran == [1]
        assert (await jobs.get(enqueued.id)).state == "done"
        answered = _said(caplog, logging.INFO)
        assert len(answered) == 1 and "answers again after" in answered[0], answered
        assert _said(caplog, logging.WARNING) == []
        caplog.clear()

        # A second outage starts again from the poll interval, with its own warning.
        driver.away = True
        again = clock.now_ms()
        await _step_until(clock, again + 4_000, driver)
        tried = [at for at, failed in driver.claims if failed and at >= again]
        assert [b - a for a, b in pairwise(tried)][:2] == [500, 1_000]
        assert len(_said(caplog, logging.WARNING)) == 1
        driver.away = False
        worker.stop()
        await _step_until(clock, clock.now_ms() + BACKOFF_MAX_MS, driver)
        await run


async def test_a_stop_ends_a_claims_backoff_at_once(registry: JobRegistry) -> None:
    clock = SteppedClock()
    driver = AwayDriver(clock)
    driver.away = True
    jobs = Jobs(driver, registry=registry, clock=clock)

    @job(name="charge", idempotency_key=lambda i: str(i.n), registry=registry)
    async def charge(item: Item, ctx: JobContext) -> None:
        pass

    worker = Worker(jobs, concurrency=1, scheduler=False, outbox_relay=False, prune=False)
    with anyio.fail_after(10):
        run = asyncio.create_task(worker.run())
        await _step_until(clock, clock.now_ms() + 2 * MINUTE, driver)
        await worker.stop()  # no clock moved: the 30 s wait does not hold the stop
        await run
