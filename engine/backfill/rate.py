"""The `rate` throttle: batches per second as an interval between batch starts, and the wait.

The wait is on the injected clock (rule 9) inside the job body's cancel scope, so an operator's
cancel, a timeout or a drain stops it at once. It is measured from the previous batch's recorded
start, so replaying batches a crash already completed waits for nothing: each of them started at
least one interval after the one before it.
"""

from __future__ import annotations

import math

from engine.clock import Clock


def interval_ms(rate: float | None) -> int:
    """Milliseconds between batch starts for `rate` batches per second; 0 when unthrottled."""
    if rate is None:
        return 0
    return math.ceil(1000 / rate)


class Pacer:
    """Spaces batch starts at least `interval_ms(rate)` apart on `clock`."""

    def __init__(self, rate: float | None, clock: Clock) -> None:
        self.interval_ms = interval_ms(rate)
        self.clock = clock

    def wait_ms(self, previous_start: int | None) -> int:
        """How long the next batch must still wait after one that started at `previous_start`."""
        if self.interval_ms == 0 or previous_start is None:
            return 0
        return max(0, previous_start + self.interval_ms - self.clock.now_ms())

    async def wait(self, previous_start: int | None) -> None:
        delay = self.wait_ms(previous_start)
        if delay > 0:
            await self.clock.sleep_ms(delay)


__all__ = ["Pacer", "interval_ms"]
