"""Bounded waits on observable conditions (a row's state, a process's output), never on time."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable

import anyio


async def eventually(
    check: Callable[[], bool | Awaitable[bool]], *, within: float = 10, every: float = 0.01
) -> None:
    """Return once `check()` is true; fail after `within` seconds. `every` only paces the
    looking: the condition decides, not the passing of time."""
    with anyio.fail_after(within):
        while True:
            outcome = check()
            if inspect.isawaitable(outcome):
                outcome = await outcome
            if outcome:
                return
            await anyio.sleep(every)
