"""A worker waiting for work on real time: `stop()` ends the wait at once (the poke cancels the
wait's scope), and a cancellation from outside that lands with a poke is not swallowed."""

from __future__ import annotations

import asyncio

import anyio
import pytest

from engine import JobRegistry, Jobs, Worker
from engine.clock import SystemClock
from engine.drivers.memory import MemoryDriver
from engine.testing.blocked import wait_all_tasks_blocked

AN_HOUR_MS = 3_600_000


async def idle_worker() -> tuple[Worker, asyncio.Task[None]]:
    """A worker on the real clock, polling once an hour, caught waiting for work."""
    jobs = Jobs(MemoryDriver(SystemClock()), registry=JobRegistry())
    worker = Worker(jobs, poll_ms=AN_HOUR_MS, scheduler=False, outbox_relay=False, prune=False)
    run = asyncio.create_task(worker.run())
    await wait_all_tasks_blocked()
    assert worker.wake.waiting_for_work  # waiting for work, not for a slot
    return worker, run


async def test_stop_ends_an_hour_long_wait_for_work_at_once() -> None:
    worker, run = await idle_worker()
    worker.stop()
    with anyio.fail_after(5):
        await run  # returns normally: the poke's own cancellation is swallowed
    assert not worker.wake.waiting_for_work


async def test_a_cancellation_from_outside_is_not_taken_for_the_poke() -> None:
    worker, run = await idle_worker()
    worker.stop()  # the poke cancels the wait...
    run.cancel()  # ...and so does whoever owns the task, in the same turn
    with anyio.fail_after(5), pytest.raises(asyncio.CancelledError):
        await run


async def test_the_wait_swallows_the_pokes_cancellation_and_no_other() -> None:
    # At the wait itself (run() above has anyio's task group to re-raise a lost cancellation):
    # a poke alone ends the wait quietly; a poke and a cancel together end it cancelled.
    jobs = Jobs(MemoryDriver(SystemClock()), registry=JobRegistry())
    worker = Worker(jobs, scheduler=False, outbox_relay=False)
    never = asyncio.Event()
    for also_cancelled in (False, True):
        waiting = asyncio.create_task(worker._race(never.wait))
        await wait_all_tasks_blocked()
        worker.wake.poke()
        if also_cancelled:
            waiting.cancel()
            with anyio.fail_after(5), pytest.raises(asyncio.CancelledError):
                await waiting
        else:
            with anyio.fail_after(5):
                await waiting
