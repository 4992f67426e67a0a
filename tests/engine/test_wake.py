"""In-process wake-ups are kept until a waiter consumes them."""

from __future__ import annotations

import asyncio

import anyio

from engine import ManualClock, SystemClock
from engine.clock import ServerClock, sleeps_in_real_time
from engine.testing.blocked import wait_all_tasks_blocked
from engine.wake import Waker


async def test_a_wake_up_between_claim_and_wait_is_not_lost() -> None:
    clock = ManualClock()
    waker = Waker()
    waker.notify()  # nobody is waiting yet, as between a claim and the wait
    with anyio.fail_after(5):
        await waker.wait(clock, 3_600_000)  # returns at once: the notify was kept
    async with anyio.create_task_group() as tg:
        tg.start_soon(waker.wait, clock, 1_000)
        await wait_all_tasks_blocked()
        clock.advance(1_000)  # consumed: this wait times out on the clock instead


async def test_a_wait_on_the_servers_time_starts_no_timer_task() -> None:
    # A PostgreSQL or Redis worker reads time through a ServerClock over the system clock: its
    # idle wait must be the loop's own timeout, not a timer task started and cancelled on
    # every wake-up (that doubled an idle worker's time from a NOTIFY to its claim).
    clock = ServerClock(SystemClock(), "test")
    waker = Waker()
    async with anyio.create_task_group() as tg:
        before = len(asyncio.all_tasks())
        tg.start_soon(waker.wait, clock, 3_600_000)
        await wait_all_tasks_blocked()
        assert len(asyncio.all_tasks()) == before + 1  # the waiter alone
        with anyio.fail_after(5):
            waker.notify()
            await wait_all_tasks_blocked()
        assert len(asyncio.all_tasks()) == before


def test_only_the_system_clock_sleeps_in_real_time() -> None:
    class Stepped(SystemClock):  # a clock of its own sleeps: not the loop's timeout
        async def sleep_ms(self, ms: int) -> None:
            await anyio.lowlevel.checkpoint()

    assert sleeps_in_real_time(SystemClock())
    assert sleeps_in_real_time(ServerClock(SystemClock(), "test"))
    assert not sleeps_in_real_time(ManualClock())
    assert not sleeps_in_real_time(ServerClock(ManualClock(), "test"))
    assert not sleeps_in_real_time(Stepped())
