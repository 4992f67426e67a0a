"""In-process wake-ups: an enqueue nudges idle workers sharing this process."""

from __future__ import annotations

import asyncio

import anyio

from engine.clock import Clock, sleeps_in_real_time


class Waker:
    """A notification that is remembered until a waiter consumes it.

    A worker claims, finds the queue empty, then waits; an enqueue landing between the claim and
    the wait would be lost with a plain event and the job would sit until the next poll. Here it
    is kept: the next `wait()` returns at once and the worker claims again (at worst one claim
    that finds nothing).
    """

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def notify(self) -> None:
        self._event.set()

    async def wait(self, clock: Clock, timeout_ms: int) -> None:
        """Return on a pending or the next `notify()`, or after `timeout_ms` of clock time."""
        event = self._event
        await wait_for_event(event, clock, timeout_ms)
        if self._event is event and event.is_set():
            self._event = asyncio.Event()  # consumed: the next wait blocks until a new notify


async def wait_for_event(event: asyncio.Event, clock: Clock, timeout_ms: int) -> None:
    """Return once `event` is set, or after `timeout_ms` of `clock`'s time."""
    if event.is_set():
        return
    if sleeps_in_real_time(clock):
        # The loop's own timeout: no timer task to start and then cancel on every wake-up
        # (a task group's cost doubled an idle worker's wake-up to its claim).
        try:
            async with asyncio.timeout(max(0, timeout_ms) / 1000):
                await event.wait()
        except TimeoutError:
            pass
        return
    async with anyio.create_task_group() as tg:

        async def _timer() -> None:
            await clock.sleep_ms(timeout_ms)
            tg.cancel_scope.cancel()

        tg.start_soon(_timer)
        await event.wait()
        tg.cancel_scope.cancel()
