"""In-process wake-ups: an enqueue nudges idle workers sharing this process."""

from __future__ import annotations

import asyncio

from engine.clock import Clock, sleep_unless_woken


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
        await sleep_unless_woken(clock, timeout_ms, event)
        if self._event is event and event.is_set():
            self._event = asyncio.Event()  # consumed: the next wait blocks until a new notify
