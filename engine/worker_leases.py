"""The leases of the jobs a worker holds: a heartbeat every third of a lease renews them (and
hears an operator's cancel), a watch on the event loop notes when it was blocked so long that
no heartbeat could run (engine.run_job.late_heartbeat), and a job claimed ahead whose lease ran
out while it waited for a slot is not started (another worker may have claimed it since).
"""

from __future__ import annotations

import logging
from collections import deque
from functools import partial
from typing import TYPE_CHECKING

import anyio

from engine.errors import JobsError, JobSlotLostError
from engine.run_job import RunHandle, Runtime, late_heartbeat
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
        # When each held lease runs out as this worker last renewed it, by (job id, token): a
        # claim's own end until a heartbeat renews it.
        self._renewed: dict[tuple[str, str], int] = {}

    def beat_ms(self) -> int:
        return max(1, self.runtime.lease_ms // 3)

    async def keep(self) -> None:
        every = self.beat_ms()
        while True:
            await self.runtime.clock.sleep_ms(every)
            await attempt("lease heartbeat", logger, self.beat)

    async def beat(self) -> None:
        """One heartbeat for each job held, concurrently. A lost lease or an operator's cancel
        stops that job's body here, which is how "cancel" reaches a running job; a renewal
        moves the end `unstartable` reads."""
        held = list(self.held.values())
        keys = {_key(handle) for handle in held}
        self._renewed = {key: end for key, end in self._renewed.items() if key in keys}
        async with anyio.create_task_group() as tg:
            for handle in held:
                tg.start_soon(self._beat_one, handle)

    async def _beat_one(self, handle: RunHandle) -> None:
        rt = self.runtime
        try:
            result = await rt.driver.heartbeat(*_key(handle), rt.lease_ms)
        except JobSlotLostError:
            handle.stop("lease_lost")
            return
        except JobsError:
            return  # transient database trouble: the lease has slack for two more beats
        if result.cancel_requested:
            handle.stop("cancelled")
        else:
            self._renewed[_key(handle)] = result.lease_expires_at

    def unstartable(self, handle: RunHandle) -> str | None:
        """Why a job claimed ahead must not start now (None: it may). One whose lease ran out
        while it waited (heartbeats unanswered in an outage, a stalled event loop) may be
        another worker's already: it is stopped as a lost lease, and left unsettled for the
        next claim to take."""
        if handle.reason is not None:
            return f"{handle.reason} before it started"
        claimed = handle.claimed
        end = self._renewed.get(_key(handle), claimed.lease_expires_at)
        if self.runtime.clock.now_ms() < end:
            return None
        handle.stop("lease_lost")
        logger.warning(
            "job %s (%s) claimed ahead is not started: its lease ran out %d ms ago while it "
            "waited for a slot, and another worker may run it now",
            claimed.record.id,
            claimed.record.name,
            self.runtime.clock.now_ms() - end,
        )
        return "lease ran out before it started"

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


def _key(handle: RunHandle) -> tuple[str, str]:
    return handle.claimed.record.id, handle.claimed.token
