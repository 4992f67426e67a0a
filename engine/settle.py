"""Group commit above the driver: concurrent settles of one kind share one set-wise write; and
`until_written`, the rule that a write recording finished work is tried again while it can be.

While one flush is in flight, new calls queue; the next flush hands every queued item to ONE
`ack_many` / `save_steps_many` call and gives each caller its own outcome. Sixteen workers acking
at once cost the driver one write, not sixteen, and each caller still returns only after the
write carrying its item committed (rule 6 for steps, fencing for acks). Every driver gets this
by implementing the two set-wise methods of the Protocol.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from engine.clock import Clock, next_retry_pause_ms
from engine.driver_errors import DriverUnavailableError
from engine.drivers.base import AckWrite, Driver, StepWrite
from engine.drivers.holding import was_let_go
from engine.errors import JobsError, JobSlotLostError
from schemas.steps import StepRecord

__all__ = ["MAX_BATCH", "GroupCommit", "Settler", "until_written"]

logger = logging.getLogger("mcp_jobs.worker")

T = TypeVar("T")
R = TypeVar("R")

# One flush carries at most this many items; the rest wait for the next (bounds statement size).
MAX_BATCH = 500

# Writes a batch of values; one outcome per value, in order: an exception instance is that
# value's own failure (its caller raises it), anything else its result.
Flush = Callable[[Sequence[T]], Awaitable[Sequence[R | BaseException]]]


@dataclass(eq=False, slots=True)
class _Item(Generic[T]):
    value: T
    key: Hashable
    # Resolved once, when the item is done (or can no longer be): its caller waits on it.
    waiter: asyncio.Future[None]
    finished: bool = False
    error: BaseException | None = None
    result: Any = None


class GroupCommit(Generic[T, R]):
    """A queue of one kind of write with one flush in flight at a time.

    Flushes run in a task of their own, started when an item finds none running and ended when
    the queue is empty: no caller waits while its task flushes others' batches, and no caller's
    cancellation can interrupt a write that carries others' items (without a shielded cancel
    scope on the hot path)."""

    def __init__(self, flush: Flush[T, R], *, kind: str = "driver") -> None:
        self._flush = flush
        self._kind = kind
        self._pending: list[_Item[T]] = []
        self._runner: asyncio.Task[None] | None = None

    async def submit(self, value: T, key: Hashable) -> R:
        """Queue `value`; return its result once its batch was written, or raise its own error.
        Two items with one `key` never share a batch (one statement cannot write a row twice).
        Cancelled while still queued, the item is dropped; once its batch went out, the batch
        is seen through without its caller."""
        item: _Item[T] = _Item(value, key, asyncio.get_running_loop().create_future())
        self._pending.append(item)
        if self._runner is None:
            self._runner = asyncio.ensure_future(self._run())
        try:
            await item.waiter
        except BaseException:
            if not item.finished and item in self._pending:
                self._pending.remove(item)  # it must not run later on nobody's behalf
            raise
        if item.error is not None:
            raise item.error
        result: R = item.result
        return result

    async def idle(self) -> None:
        """Return once no flush is running (a closing driver lets the last one commit)."""
        while self._runner is not None:
            await asyncio.wait({self._runner})

    def _take(self) -> list[_Item[T]]:
        batch: list[_Item[T]] = []
        keys: set[Hashable] = set()
        rest: list[_Item[T]] = []
        for item in self._pending:
            if item.key in keys or len(batch) >= MAX_BATCH:
                rest.append(item)
            else:
                keys.add(item.key)
                batch.append(item)
        self._pending = rest
        return batch

    async def _run(self) -> None:
        batch: list[_Item[T]] = []
        try:
            while self._pending:
                batch = self._take()
                try:
                    outcomes = await self._flush([item.value for item in batch])
                except Exception as exc:
                    for item in batch:
                        item.error, item.finished = exc, True
                else:
                    for item, outcome in zip(batch, outcomes, strict=True):
                        if isinstance(outcome, BaseException):
                            item.error = outcome
                        else:
                            item.result = outcome
                        item.finished = True
                for item in batch:
                    _wake(item)
                batch = []
        finally:
            self._runner = None
            # Torn out mid-flush: whoever still waits hears it rather than waiting forever.
            for item in [*batch, *self._pending]:
                if not item.finished:
                    item.error, item.finished = self._abandoned(), True
                    _wake(item)
            self._pending = []

    def _abandoned(self) -> DriverUnavailableError:
        return DriverUnavailableError(
            self._kind,
            "the flush carrying this write was cancelled before it settled (the event loop is "
            "closing); the job's lease decides what happens to it",
            "mcp-jobs jobs ls --json",
        )


def _wake(item: _Item[Any]) -> None:
    if not item.waiter.done():
        item.waiter.set_result(None)


class Settler:
    """The engine's one way to settle a claimed job or save a step: group-committed over
    `driver.ack_many` / `driver.save_steps_many`."""

    def __init__(self, driver: Driver) -> None:
        self.driver = driver
        self._acks: GroupCommit[AckWrite, None] = GroupCommit(driver.ack_many, kind=driver.kind)
        self._steps: GroupCommit[StepWrite, None] = GroupCommit(
            driver.save_steps_many, kind=driver.kind
        )

    async def ack(self, job_id: str, token: str, output: Any = None) -> None:
        """Settle the job as done; returns once the write carrying it committed. Raises that
        item's own error (`JobSlotLostError` when `token` no longer holds the job)."""
        await self._acks.submit(AckWrite(job_id, token, output), job_id)

    async def save_step(self, job_id: str, token: str, step: StepRecord) -> None:
        """Upsert `step`; returns once it committed (rule 6), or raises its own error."""
        await self._steps.submit(StepWrite(job_id, token, step), (job_id, step.name))

    async def idle(self) -> None:
        """Return once no flush of either kind is in flight."""
        await self._acks.idle()
        await self._steps.idle()


async def until_written(clock: Clock, what: str, write: Callable[[], Awaitable[None]]) -> None:
    """`write` (a run's ack or nack, a completed step) again after a failure that may pass (the
    database away, its disk full) until it commits or is refused for good. What it writes is in
    hand and the heartbeat keeps the lease; given up on, the job (or the step) would run again
    once the lease ran out. A lease another worker took meanwhile refuses it by its token
    (JOB_SLOT_LOST). A failure of a settle its driver let go (a worker stopped twice) says
    nothing here: the worker's one line said it for every job."""
    pause = 0
    said = False
    while True:
        try:
            await write()
        except JobSlotLostError:
            raise
        except JobsError as exc:
            if not exc.retryable:
                raise
            if not said and not was_let_go(exc):
                said = True
                logger.warning("%s is not written yet, trying again until it is: %s", what, exc)
            pause = next_retry_pause_ms(pause)
            await clock.sleep_ms(pause)
        else:
            if pause:
                logger.info("%s is written", what)
            return
