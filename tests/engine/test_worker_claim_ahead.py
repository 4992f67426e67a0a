"""How far a worker claims ahead: two claims on their way at once with a backlog, and none
beyond the free slots once its jobs run long."""

from __future__ import annotations

from typing import Any

import anyio

from engine import JobRegistry, Jobs, ManualClock, Worker
from engine.drivers.memory import MemoryDriver
from engine.testing.blocked import wait_all_tasks_blocked
from engine.worker import CLAIMS_IN_FLIGHT
from tests.support.worker_jobs import Item, keyed_job, recording_job


class GatedClaims(MemoryDriver):
    """Every claim after the first waits at `gate`; `most` is the most on their way at once."""

    def __init__(self, clock: ManualClock) -> None:
        super().__init__(clock)
        self.gate = anyio.Event()
        self.calls = 0
        self.open = 0
        self.most = 0

    async def claim(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        self.open += 1
        self.most = max(self.most, self.open)
        try:
            if self.calls > 1:
                await self.gate.wait()
            return await super().claim(*args, **kwargs)
        finally:
            self.open -= 1


async def test_with_a_backlog_two_claims_are_on_their_way_at_once(
    clock: ManualClock, registry: JobRegistry
) -> None:
    driver = GatedClaims(clock)
    jobs = Jobs(driver, registry=registry, clock=clock)
    work, ran = recording_job(registry)
    for n in range(40):
        await jobs.enqueue(work, {"n": n})
    worker = Worker(jobs, concurrency=4, scheduler=False, outbox_relay=False)
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(worker.run)
            await wait_all_tasks_blocked()
            # The first claim filled the slots; the next two left while those jobs ran.
            assert driver.open == CLAIMS_IN_FLIGHT == 2
            driver.gate.set()
            while len(ran) < 40:
                await wait_all_tasks_blocked()
            worker.stop()
    assert sorted(ran) == list(range(40)) and driver.most == CLAIMS_IN_FLIGHT


async def test_jobs_that_run_long_are_not_claimed_ahead(
    clock: ManualClock, registry: JobRegistry
) -> None:
    """A second a body: at 2 slots no job would start within the horizon, so the worker claims
    only for slots that are free — from its first claim, before it has timed a body, too (a
    worker killed then would leave the jobs it claimed ahead to their leases)."""
    jobs = Jobs(MemoryDriver(clock), registry=registry, clock=clock)
    ran: list[int] = []

    async def body(item: Item) -> None:
        ran.append(item.n)
        await clock.sleep_ms(1_000)

    work = keyed_job(registry, body)
    for n in range(20):
        await jobs.enqueue(work, {"n": n})
    worker = Worker(jobs, concurrency=2, prefetch=4, scheduler=False, outbox_relay=False)
    held: list[int] = []
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(worker.run)
            await wait_all_tasks_blocked()
            while len(ran) < 20:
                held.append(worker.in_flight)
                clock.advance(1_000)
                await wait_all_tasks_blocked()
            worker.stop()
            clock.advance(1_000)
    assert set(held) == {2}
    assert sorted(ran) == list(range(20))
