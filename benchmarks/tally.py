"""Counting executions inside a worker process: the exactly-once check and the drain clock.

Every benchmark handler calls `start(i)` when its body begins and `end(i)` when it returns. The
worker is stopped once every job index has ended at least once; any index seen twice (or never)
fails the exactly-once check. Thread-safe, because DBOS runs workflow bodies off the main loop.
"""

from __future__ import annotations

import asyncio
import threading
import time
from array import array
from collections.abc import Callable
from typing import Any


class Tally:
    """Executions per job index `0..n-1`, with start times when latency is measured."""

    def __init__(
        self, n: int, *, keep_starts: bool = False, on_begin: Callable[[], None] | None = None
    ) -> None:
        self.n = n
        self._on_begin = on_begin
        self._starts_count = array("I", bytes(4 * n))
        self._ended = bytearray(n)
        self._ended_distinct = 0
        self._executions = 0
        self._out_of_range = 0
        self._lock = threading.Lock()
        self.start_times: list[float] | None = [0.0] * n if keep_starts else None
        self.began_at = 0.0
        self.done_at = 0.0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._done = asyncio.Event()
        self._done_flag = threading.Event()

    def bind(self) -> None:
        """Attach to the running loop, so `start`/`end` from other threads can wake it."""
        self._loop = asyncio.get_running_loop()

    def begin(self) -> None:
        """The drain clock starts here: the worker is built and about to take its first job."""
        self.began_at = time.monotonic()
        if self._on_begin is not None:
            self._on_begin()

    def start(self, i: int) -> None:
        now = time.monotonic()
        with self._lock:
            self._executions += 1
            if not 0 <= i < self.n:
                self._out_of_range += 1
                return
            self._starts_count[i] += 1
            if self.start_times is not None and self._starts_count[i] == 1:
                self.start_times[i] = now

    def end(self, i: int) -> None:
        now = time.monotonic()
        with self._lock:
            if not 0 <= i < self.n or self._ended[i]:
                return
            self._ended[i] = 1
            self._ended_distinct += 1
            finished = self._ended_distinct == self.n
            if finished:
                self.done_at = now
        if finished:
            self._done_flag.set()
            loop = self._loop
            if loop is not None and not loop.is_closed():
                loop.call_soon_threadsafe(self._done.set)

    @property
    def complete(self) -> bool:
        return self._done_flag.is_set()

    async def wait(self) -> None:
        if self.n == 0:
            return
        await self._done.wait()

    def summary(self) -> dict[str, Any]:
        """What the parent checks: exactly-once holds when `duplicates == missing == 0`."""
        with self._lock:
            counts = list(self._starts_count)
            executions = self._executions
            out_of_range = self._out_of_range
        duplicates = sum(1 for c in counts if c > 1)
        missing = sum(1 for c in counts if c == 0)
        return {
            "jobs": self.n,
            "executions": executions,
            "duplicates": duplicates,
            "missing": missing,
            "out_of_range": out_of_range,
            "elapsed_s": max(0.0, self.done_at - self.began_at) if self.complete else None,
        }
