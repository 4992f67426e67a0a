"""The overview's time series: the engine's own per-queue counts (`queue_stats`), sampled by a
background task every few seconds into a fixed-size ring per queue covering the last hour.

Memory is bounded twice: each ring holds at most `capacity` samples, and a queue that has not
appeared in a reading for a whole window is forgotten, so rings never outnumber live queues.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from engine.clock import Clock
from engine.rules import RECENT_SETTLED_MS
from mcp_jobs.operations.models import QueueStatsView

logger = logging.getLogger("mcp_jobs.dashboard")

WINDOW_MS = 3_600_000
DEFAULT_INTERVAL_MS = 10_000


@dataclass(frozen=True)
class Sample:
    """One queue at one reading: its depth (ready jobs, rule 7's depth) and the jobs it settled
    per minute since the reading before."""

    at: int
    depth: int
    throughput_per_min: float


@dataclass(frozen=True)
class _Last:
    at: int
    done: int
    failed_dead: int


def settled_since(before: _Last, after: QueueStatsView, at: int) -> float:
    """Jobs settled between two readings. `done` counts the last hour only, so its change is the
    new completions minus the ones that aged out of that window; the aged-out part is estimated
    at the window's average rate (steady state then reads its true rate, not zero). Failed and
    dead are counted in full: a retry lowers them, which is not negative throughput."""
    elapsed = max(at - before.at, 0)
    aged_out = before.done * min(elapsed, RECENT_SETTLED_MS) / RECENT_SETTLED_MS
    done = max(after.done - before.done + aged_out, 0.0)
    return done + max(after.failed + after.dead - before.failed_dead, 0)


class Sampler:
    """Per-queue rings of `Sample`s, fed by `record` (one `queue_stats` reading at a time)."""

    def __init__(self, interval_ms: int = DEFAULT_INTERVAL_MS, window_ms: int = WINDOW_MS) -> None:
        if interval_ms <= 0:
            raise ValueError("interval_ms must be positive")
        self.interval_ms = interval_ms
        self.window_ms = window_ms
        self.capacity = max(window_ms // interval_ms, 1)
        self._rings: dict[str, deque[Sample]] = {}
        self._last: dict[str, _Last] = {}

    def record(self, at: int, queues: Sequence[QueueStatsView]) -> None:
        for q in queues:
            last = self._last.get(q.queue)
            per_min = 0.0
            if last is not None and at > last.at:
                per_min = settled_since(last, q, at) * 60_000 / (at - last.at)
            ring = self._rings.setdefault(q.queue, deque(maxlen=self.capacity))
            ring.append(Sample(at=at, depth=q.ready, throughput_per_min=per_min))
            self._last[q.queue] = _Last(at=at, done=q.done, failed_dead=q.failed + q.dead)
        for name in [n for n, ring in self._rings.items() if ring[-1].at <= at - self.window_ms]:
            del self._rings[name], self._last[name]

    def series(self, queue: str) -> list[Sample]:
        """The queue's samples within the last window, oldest first."""
        return list(self._rings.get(queue, ()))

    def size(self) -> int:
        """Samples held in all, for the memory bound's test."""
        return sum(len(ring) for ring in self._rings.values())

    async def run(
        self, read: Callable[[], Awaitable[Sequence[QueueStatsView]]], clock: Clock
    ) -> None:
        """Sample forever on `clock` (cancel to stop). A failed reading is skipped, not fatal:
        the next one may succeed (a database restarting)."""
        while True:
            try:
                self.record(clock.now_ms(), await read())
            except Exception:  # the page still serves; the gap shows in the sparkline
                logger.warning("dashboard sample not taken", exc_info=True)
            await clock.sleep_ms(self.interval_ms)
