"""Progress: `ctx.progress(done, total, message)` from a job body, stored cheaply.

A body may report in a tight loop; the store sees at most one write per run per
`PROGRESS_INTERVAL_MS` of the worker's clock. The first report is written at once; later ones
inside the interval only replace the value kept in memory, and a flush writes the latest one
when the interval has passed. The end of the run writes what is still pending before the job
settles, so the final value is stored; a run stopped by a cancel, a lost lease or a torn-down
worker drops it. Every write is fenced by the run's lease token: a holder whose lease was taken
over writes nothing, and its job is not failed for it (the write is logged and dropped).

A job that never reports costs one small object: no task, no write, no await at its settle.

Kept on the record: through the ack (an inspected finished job shows its last value) and
through a retry, with the attempt that reported it, until the new attempt reports (the claim
path does not write it).
"""

from __future__ import annotations

import asyncio
import logging
import sys

import anyio.from_thread

from engine import bounds
from engine.clock import Clock
from engine.drivers.base import ProgressStore
from engine.errors import InvalidArgumentError
from engine.logs import log_lost
from schemas.progress import Progress

# At most one progress write per run in this much of the worker's clock.
PROGRESS_INTERVAL_MS = 1_000
# A progress message, in bytes of UTF-8: a status line, not a log.
MAX_MESSAGE_BYTES = 200

Number = int | float

logger = logging.getLogger("mcp_jobs.progress")


def checked(
    done: object, total: object, message: object
) -> tuple[Number, Number | None, str | None]:
    """The report within bounds: `done` ≥ 0, `total` > 0 and ≥ `done` (or None when unknown),
    `message` a short storable line (or None); else INVALID_ARGUMENT naming the argument."""
    done_n = bounds.number("done", done, 0, sys.float_info.max, whole=False, unit="units done")
    total_n: Number | None = None
    if total is not None:
        total_n = bounds.number("total", total, 0, sys.float_info.max, whole=False)
        if total_n == 0:
            raise InvalidArgumentError("total", total, "a number > 0, or None when unknown")
        if done_n > total_n:
            raise InvalidArgumentError("done", done, f"a number from 0 to total ({total_n})")
    text = bounds.optional_text("message", message, MAX_MESSAGE_BYTES)
    return done_n, total_n, text


class ProgressReporter:
    """One run's progress: the value kept in memory and the one flush task that writes it."""

    __slots__ = (
        "_attempt",
        "_clock",
        "_driver",
        "_job_id",
        "_next_at",
        "_pending",
        "_sleeping",
        "_stopped",
        "_task",
        "_token",
    )

    def __init__(self, driver: object, clock: Clock, job_id: str, token: str, attempt: int) -> None:
        self._driver = driver
        self._clock = clock
        self._job_id = job_id
        self._token = token
        self._attempt = attempt
        self._pending: Progress | None = None
        self._task: asyncio.Task[None] | None = None
        self._next_at = 0  # when the next write may go, on the clock
        self._sleeping = False
        self._stopped = False

    @property
    def active(self) -> bool:
        """Whether a write is pending or in flight (the run's end has something to do)."""
        return self._task is not None or self._pending is not None

    def report(self, done: object, total: object = None, message: object = None) -> None:
        done_n, total_n, text = checked(done, total, message)
        if self._stopped:
            return
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            # From a sync step's worker thread (ctx.step.run): keep and flush on the loop's thread.
            anyio.from_thread.run_sync(self.report, done_n, total_n, text)
            return
        self._pending = Progress(
            done=done_n, total=total_n, message=text, at=self._clock.now_ms(), attempt=self._attempt
        )
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._flush())

    async def _flush(self) -> None:
        try:
            while self._pending is not None and not self._stopped:
                wait = self._next_at - self._clock.now_ms()
                if wait > 0:
                    self._sleeping = True
                    try:
                        await self._clock.sleep_ms(wait)
                    finally:
                        self._sleeping = False
                value, self._pending = self._pending, None
                if value is None:
                    break
                self._next_at = self._clock.now_ms() + PROGRESS_INTERVAL_MS
                await self._write(value)
        finally:
            self._task = None

    async def _write(self, value: Progress) -> None:
        store = self._driver
        if not isinstance(store, ProgressStore):
            self._stopped = True  # a driver that keeps no progress: reports are dropped
            return
        try:
            written = await store.save_progress(self._job_id, self._token, value)
        except Exception as exc:
            # Best effort: a report must never fail the job. A later report (or the run's end)
            # writes the latest value again.
            log_lost(logger, exc, "progress of job %s not stored", self._job_id)
            return
        if not written:
            # The token no longer holds the job: its lease went to another holder.
            self._stopped = True
            logger.info("progress of job %s dropped: its lease is held elsewhere", self._job_id)

    async def finish(self) -> None:
        """The run is over and about to settle: write what is pending now, not at the interval."""
        self._next_at = 0
        task = self._task
        if task is not None:
            if self._sleeping:
                task.cancel()
            await asyncio.wait([task])
        value, self._pending = self._pending, None
        if value is not None and not self._stopped:
            await self._write(value)

    def abandon(self) -> None:
        """The run was stopped (cancel, lost lease, torn down): nothing more is written. A write
        in flight finishes (its token fences it); a flush waiting for the interval ends."""
        self._stopped = True
        self._pending = None
        if self._task is not None and self._sleeping:
            self._task.cancel()
