"""The leases of the jobs a worker holds: a heartbeat every third of a lease renews them (and
hears an operator's cancel), and a watch on the event loop notes when it was blocked so long
that no heartbeat could run (engine.run_job.late_heartbeat).
"""

from __future__ import annotations

import logging
from collections import deque
from functools import partial
from typing import TYPE_CHECKING

from engine.run_job import RunHandle, Runtime, keep_leases, late_heartbeat
from engine.services import attempt

if TYPE_CHECKING:
    from anyio.abc import TaskGroup

logger = logging.getLogger("mcp_jobs.worker")


class LeaseKeeper:
    """Keeps the leases of `held` (the worker's jobs by id, the same dict it updates), for a
    worker of `concurrency` slots."""

    def __init__(self, runtime: Runtime, held: dict[str, RunHandle], concurrency: int) -> None:
        self.runtime = runtime
        self.held = held
        # The bodies that ended last, with when (the worker appends): a body that blocked the
        # event loop ends before a task that waits on a timer runs again (`watch`).
        self.ended: deque[tuple[int, RunHandle]] = deque(maxlen=max(1, concurrency))

    def beat_ms(self) -> int:
        return max(1, self.runtime.lease_ms // 3)

    async def keep(self) -> None:
        every = self.beat_ms()
        while True:
            await self.runtime.clock.sleep_ms(every)
            beats = partial(keep_leases, self.runtime, self.held.values())
            await attempt("lease heartbeat", logger, beats)

    async def watch(self, tg: TaskGroup) -> None:
        """How late the event loop wakes a task that awaits nothing but its sleep: more than a
        beat late, the loop was blocked (a body running blocking code) and no heartbeat could
        renew a lease meanwhile. Measured apart from the heartbeat, whose own writes would hide
        a block that fell while they were awaited. Its notes are written beside it (`tg`), for
        the same reason."""
        clock = self.runtime.clock
        every = self.beat_ms()
        while True:
            asleep = clock.now_ms()
            await clock.sleep_ms(every)
            late = clock.now_ms() - asleep - every
            if late <= every:
                continue
            # In flight now, or ended while this task slept: the body that blocked the loop
            # has most often returned by the time this task runs.
            ran = {h.claimed.record.id: h for at, h in self.ended if at >= asleep}
            ran.update(self.held)
            if ran:
                noted = partial(late_heartbeat, self.runtime, late, list(ran.values()))
                tg.start_soon(attempt, "late heartbeat note", logger, noted)
