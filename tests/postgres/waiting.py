"""Bounded waits on observable conditions (a row's state, a process's output), never on time."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio

from engine import ManualClock
from engine.errors import JobsError

T = TypeVar("T")


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


class CountingClock(ManualClock):
    """A retry clock that says how many retries are waiting on it."""

    def __init__(self) -> None:
        super().__init__(0)
        self.waiting = 0

    async def sleep_ms(self, ms: int) -> None:
        self.waiting += 1
        try:
            await super().sleep_ms(ms)
        finally:
            self.waiting -= 1


async def pump(retry: ManualClock, done: anyio.Event, step_ms: int) -> None:
    """Move the retry clock in steps until `done` (bounded by the caller)."""

    def moved() -> bool:
        if not done.is_set():
            retry.advance(step_ms)
        return done.is_set()

    await eventually(moved, every=0.02)


async def pumped(retry: ManualClock, call: Callable[[], Awaitable[T]], step_ms: int = 50) -> T:
    """`call()`, with the retry clock moved on until it ends (its pauses between tries pass
    without the test waiting for time)."""
    outcome: list[T] = []
    failed: list[JobsError] = []
    done = anyio.Event()

    async def run() -> None:
        try:
            outcome.append(await call())
        except JobsError as exc:
            failed.append(exc)
        finally:
            done.set()

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            await pump(retry, done, step_ms)
    if failed:
        raise failed[0]
    return outcome[0]
