"""Group commit for the settle paths: concurrent calls of one kind share one statement.

While one flush is in flight, new calls queue; the next flush sends every queued item in ONE
statement (an `unnest` of arrays) and hands each caller its own outcome. Sixteen workers acking
at once cost one round trip and one commit, not sixteen, and each caller still returns only
after the statement carrying its item has committed (rule 6 for steps, fencing for acks).

A statement the server refuses for what one item carries (a data error) is sent again in halves
(`flush_apart`), so one item's bad value settles only that item: its batch-mates commit.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from engine.errors import DriverUnavailableError

T = TypeVar("T")
R = TypeVar("R")

# One flush sends at most this many items; the rest wait for the next (bounds statement size).
MAX_BATCH = 500


@dataclass(eq=False)
class Item(Generic[T]):
    """One caller's request and, once flushed, its outcome (`error` set means it raises)."""

    value: T
    key: Hashable
    # Resolved once, when the item is done (or can no longer be): its caller waits on it.
    waiter: asyncio.Future[None]
    finished: bool = False
    error: BaseException | None = None
    result: Any = None


# Runs one batch and settles every item in it (sets `finished`, and `error` or `result`).
Flush = Callable[[Sequence[Item[T]]], Awaitable[None]]


class GroupCommit(Generic[T]):
    """Queue of one kind of write; one flush in flight at a time.

    Flushes run in a task of their own, started when an item finds none running and ended
    when the queue is empty. So no caller's job waits while its task flushes other callers'
    batches, and no cancellation of a caller can interrupt a statement that carries other
    callers' items: nothing here needs a shielded cancel scope, which anyio makes cost more
    than the rest of a flush's Python. (Plain asyncio: the PostgreSQL driver runs on it.)"""

    def __init__(self, flush: Flush[T]) -> None:
        self._flush_batch = flush
        self._pending: list[Item[T]] = []
        self._runner: asyncio.Task[None] | None = None

    async def submit(self, value: T, key: Hashable) -> Any:
        """Queue `value` and return its result once its batch committed, or raise the item's
        own error. Two items with one `key` never share a batch (one statement cannot write a
        row twice). Cancelled while still queued, the item is dropped; once its batch was sent,
        the batch is seen through without its caller."""
        item: Item[T] = Item(value, key, asyncio.get_running_loop().create_future())
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
        return item.result

    async def idle(self) -> None:
        """Return once no flush is running (a closing driver lets the last one commit)."""
        while self._runner is not None:
            await asyncio.wait({self._runner})

    def _take(self) -> list[Item[T]]:
        batch: list[Item[T]] = []
        keys: set[Hashable] = set()
        rest: list[Item[T]] = []
        for item in self._pending:
            if item.key in keys or len(batch) >= MAX_BATCH:
                rest.append(item)
            else:
                keys.add(item.key)
                batch.append(item)
        self._pending = rest
        return batch

    async def _run(self) -> None:
        batch: list[Item[T]] = []
        try:
            while self._pending:
                batch = self._take()
                try:
                    await self._flush_batch(batch)
                except Exception as exc:
                    for item in batch:
                        if not item.finished:
                            item.error, item.finished = exc, True
                for item in batch:
                    _wake(item)
                batch = []
        finally:
            self._runner = None
            # Torn out mid-flush: whoever still waits hears it rather than waiting forever.
            for item in [*batch, *self._pending]:
                if not item.finished:
                    item.error, item.finished = _abandoned(), True
                    _wake(item)
            self._pending = []


def _abandoned() -> DriverUnavailableError:
    return DriverUnavailableError(
        "postgres",
        "the flush carrying this write was cancelled before it settled (the event loop is "
        "closing); the job's lease decides what happens to it",
        "mcp-jobs jobs ls --json",
    )


def _wake(item: Item[Any]) -> None:
    if not item.waiter.done():
        item.waiter.set_result(None)


async def flush_apart(
    batch: Sequence[Item[T]],
    flush: Flush[T],
    refusal: Callable[[BaseException], R | None],
    refused: Callable[[Item[T], R], BaseException],
) -> None:
    """`flush(batch)`; when it raises an error in which `refusal` finds a refusal of what the
    statement carried (None: anything else, which propagates), the batch is flushed again in
    halves until each refused item stands alone, and that item gets `refused(item, refusal)`.

    `flush` must settle every item of a batch it commits and none of one it raises for, which
    holds for one statement per batch."""
    try:
        await flush(batch)
        return
    except Exception as exc:
        found = refusal(exc)
        if found is None:
            raise
        if len(batch) == 1:
            batch[0].error, batch[0].finished = refused(batch[0], found), True
            return
    middle = len(batch) // 2
    # One half after the other: what a half committed stays settled if a later one fails.
    await flush_apart(batch[:middle], flush, refusal, refused)
    await flush_apart(batch[middle:], flush, refusal, refused)


def settle_all(
    batch: Sequence[Item[Any]], refused: Callable[[Item[Any]], BaseException | None]
) -> None:
    """Mark every item of `batch` finished, with the error `refused(item)` gives (None: done)."""
    for item in batch:
        item.error = refused(item)
        item.finished = True
