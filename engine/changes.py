"""Change signals: a cheap "something in the store changed" for readers that follow state.

A worker's wake-up (`engine.wake.Waker`) is consumed by one waiter; a reader that follows state
(the MCP server's subscriptions) must not steal it. A `ChangeFeed` is a counter instead: every
write that changes a job, a backfill or a descriptor bumps it, and any number of readers wait
for it to move past the count they last saw. It says nothing about WHAT changed: a reader
re-reads what it follows, so a burst of writes costs it one re-read, not one per write.
"""

from __future__ import annotations

import asyncio

from engine.clock import Clock, sleep_unless_woken


class ChangeFeed:
    """A change counter any number of readers wait on; nobody consumes a change."""

    def __init__(self) -> None:
        self.count = 0
        self._moved: asyncio.Event | None = None  # made on first wait: an Event needs a loop

    def notify(self) -> None:
        self.count += 1
        moved, self._moved = self._moved, None
        if moved is not None:
            moved.set()

    async def wait(self, seen: int, clock: Clock, timeout_ms: int) -> int:
        """The count once it differs from `seen`, or as it is after `timeout_ms` of clock time."""
        if self.count != seen:
            return self.count
        if self._moved is None:
            self._moved = asyncio.Event()
        await sleep_unless_woken(clock, timeout_ms, self._moved)
        return self.count
