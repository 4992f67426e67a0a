"""Injected time. Every reading of time in the engine goes through a `Clock` (rule 9)."""

from __future__ import annotations

import time
from typing import Protocol

import anyio


class Clock(Protocol):
    def now_ms(self) -> int: ...

    async def sleep_ms(self, ms: int) -> None:
        """Wait until `ms` milliseconds of THIS clock's time have passed."""
        ...


class SystemClock:
    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    async def sleep_ms(self, ms: int) -> None:
        await anyio.sleep(max(0, ms) / 1000)


class ManualClock:
    """A clock that moves only when a test moves it; sleepers wake when it passes their time."""

    def __init__(self, start_ms: int = 1_767_225_600_000) -> None:  # 2026-01-01T00:00:00Z
        self._now = start_ms
        self._sleepers: list[tuple[int, anyio.Event]] = []

    def now_ms(self) -> int:
        return self._now

    async def sleep_ms(self, ms: int) -> None:
        if ms <= 0:
            await anyio.lowlevel.checkpoint()
            return
        event = anyio.Event()
        self._sleepers.append((self._now + ms, event))
        await event.wait()

    def advance(self, ms: int) -> None:
        self.set(self._now + ms)

    def set(self, now_ms: int) -> None:
        self._now = now_ms
        due = [s for s in self._sleepers if s[0] <= now_ms]
        self._sleepers = [s for s in self._sleepers if s[0] > now_ms]
        for _, event in due:
            event.set()


class MonotonicClock:
    """Real elapsed time, for retry deadlines and pauses: a restarting server takes seconds of
    wall time whatever the jobs' clock says, and the wall clock may jump."""

    def now_ms(self) -> int:
        return time.monotonic_ns() // 1_000_000

    async def sleep_ms(self, ms: int) -> None:
        await anyio.sleep(max(0, ms) / 1000)


SYSTEM_CLOCK = SystemClock()
MONOTONIC_CLOCK = MonotonicClock()


def next_retry_pause_ms(previous_ms: int) -> int:
    """The pause before a driver's next try through a lost connection, after `previous_ms`:
    50 ms doubling up to 1 s (from 0, the first pause is 50 ms)."""
    return min(max(previous_ms * 2, 50), 1_000)


async def sleep_unless_woken(clock: Clock, ms: int, wake: anyio.Event) -> None:
    """Wait `ms` of `clock`'s time, or less if `wake` is set first (a stopping service)."""
    async with anyio.create_task_group() as tg:

        async def timer() -> None:
            await clock.sleep_ms(ms)
            tg.cancel_scope.cancel()

        tg.start_soon(timer)
        await wake.wait()
        tg.cancel_scope.cancel()
