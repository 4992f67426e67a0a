"""In-process wake-ups are kept until a waiter consumes them."""

from __future__ import annotations

import anyio

from engine import ManualClock
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
