"""Waiting on a worker's in-process services under the manual clock."""

from __future__ import annotations

import anyio

from engine import ManualClock
from engine.testing.blocked import wait_all_tasks_blocked


async def until_set(event: anyio.Event, clock: ManualClock, poll_ms: int) -> None:
    """Wait for `event`, moving the manual clock one worker poll whenever every task is idle: an
    enqueue from a sibling task (the scheduler, the relay) can land just before the worker
    starts waiting for work, and then only its poll wakes it. Callers bound this with
    `anyio.fail_after`."""
    while not event.is_set():
        await wait_all_tasks_blocked()
        if not event.is_set():
            clock.advance(poll_ms)
