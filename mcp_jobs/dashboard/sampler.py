"""The overview's time series: the engine's own per-queue counts (`queue_stats`), sampled by a
background task every few seconds into a fixed-size ring per queue covering the last hour.

Throughput is exact where the driver counts settled jobs by `finished_at`
(`operations.throughput.settled_counts`): each reading counts the jobs settled since the one
before, so a burst shows once and silence reads zero. A driver without that capability falls
back to `estimated_settled`, which reads phantom throughput for up to an hour after a burst.

Memory is bounded twice: each ring holds at most `capacity` samples, and a queue that has not
appeared in a reading for a whole window is forgotten, so rings never outnumber live queues.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

from engine.clock import Clock
from engine.logs import log_lost
from mcp_jobs.operations.models import QueueStatsView
from schemas.stats import SettledCount

logger = logging.getLogger("mcp_jobs.dashboard")

WINDOW_MS = 3_600_000
DEFAULT_INTERVAL_MS = 10_000
# A worker stamps `finished_at` before its write commits: the newest instants are counted one
# reading later, once any such write has surely landed, so no job falls between two counts.
SETTLE_LAG_MS = 1_000

Read = Callable[[], Awaitable[Sequence[QueueStatsView]]]
# The exact count over [since, until) (operations.throughput), None when the driver has none.
Count = Callable[[int, int], Awaitable[Mapping[str, SettledCount] | None]]


@dataclass(frozen=True)
class Sample:
    """One queue at one reading: its depth (ready jobs, rule 7's depth) and the jobs it settled
    per minute since the reading before (done, failed, dead: the work its workers finished)."""

    at: int
    depth: int
    throughput_per_min: float


@dataclass(frozen=True)
class _Last:
    at: int
    done: int
    failed_dead: int
    window_ms: int  # how far back `done` counted (QueueStats.settled_window_ms)


def worked(count: SettledCount) -> int:
    """The settled jobs a throughput counts: cancelled ones were not worked."""
    return count.done + count.failed + count.dead


def estimated_settled(before: _Last, after: QueueStatsView, at: int) -> float:
    """The fallback for a driver that cannot count exactly: jobs settled between two readings.
    `done` counts a recent window only (the last hour, shorter when jobs finish fast), so its
    change is the new completions minus the ones that aged out of that window; the aged-out part
    is estimated at the window's average rate (steady state then reads its true rate, not zero;
    after a burst it reads a rate for up to the window).
    Failed and dead are counted in full: a retry lowers them, which is not negative throughput."""
    elapsed = max(at - before.at, 0)
    window = before.window_ms
    aged_out = before.done * min(elapsed, window) / window if window > 0 else before.done
    done = max(after.done - before.done + aged_out, 0.0)
    return done + max(after.failed + after.dead - before.failed_dead, 0)


class Sampler:
    """Per-queue rings of `Sample`s, fed by `record` (one `queue_stats` reading at a time, with
    the exact settled counts since the reading before when the driver has them)."""

    def __init__(self, interval_ms: int = DEFAULT_INTERVAL_MS, window_ms: int = WINDOW_MS) -> None:
        if interval_ms <= 0:
            raise ValueError("interval_ms must be positive")
        self.interval_ms = interval_ms
        self.window_ms = window_ms
        self.capacity = max(window_ms // interval_ms, 1)
        self._rings: dict[str, deque[Sample]] = {}
        self._last: dict[str, _Last] = {}
        self._at: int | None = None  # the last reading's time: where the next count starts

    def record(
        self,
        at: int,
        queues: Sequence[QueueStatsView],
        settled: Mapping[str, SettledCount] | None = None,
    ) -> None:
        """One reading at `at`. `settled`: the exact counts since the previous reading (None:
        estimate from the counts' change instead)."""
        since = self._at
        for q in queues:
            last = self._last.get(q.queue)
            per_min = 0.0
            if settled is not None and since is not None and at > since:
                found = settled.get(q.queue)
                per_min = (worked(found) if found else 0) * 60_000 / (at - since)
            elif settled is None and last is not None and at > last.at:
                per_min = estimated_settled(last, q, at) * 60_000 / (at - last.at)
            ring = self._rings.setdefault(q.queue, deque(maxlen=self.capacity))
            ring.append(Sample(at=at, depth=q.ready, throughput_per_min=per_min))
            self._last[q.queue] = _Last(
                at=at, done=q.done, failed_dead=q.failed + q.dead, window_ms=q.settled_window_ms
            )
        self._at = at
        for name in [n for n, ring in self._rings.items() if ring[-1].at <= at - self.window_ms]:
            del self._rings[name], self._last[name]

    def series(self, queue: str) -> list[Sample]:
        """The queue's samples within the last window, oldest first."""
        return list(self._rings.get(queue, ()))

    def size(self) -> int:
        """Samples held in all, for the memory bound's test."""
        return sum(len(ring) for ring in self._rings.values())

    async def take(self, at: int, read: Read, count: Count | None = None) -> None:
        """One reading at `at`: the counts, and (after the first) the settled jobs since the
        last reading, both ends `SETTLE_LAG_MS` back so adjacent counts meet exactly."""
        queues = await read()
        settled = None
        since = self._at
        if count is not None and since is not None and at > since:
            settled = await count(since - SETTLE_LAG_MS, at - SETTLE_LAG_MS)
        self.record(at, queues, settled)

    async def run(self, read: Read, clock: Clock, count: Count | None = None) -> None:
        """Sample forever on `clock` (cancel to stop). A failed reading is skipped, not fatal:
        the next one may succeed (a database restarting) and counts the gap too."""
        while True:
            try:
                await self.take(clock.now_ms(), read, count)
            except Exception as exc:  # the page still serves; the gap shows in the sparkline
                log_lost(logger, exc, "dashboard sample not taken")
            await clock.sleep_ms(self.interval_ms)
