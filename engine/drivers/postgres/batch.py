"""Group commit for the settle paths: concurrent calls of one kind share one statement.

While one flush is in flight, new calls queue; the next flush sends every queued item in ONE
statement (an `unnest` of arrays) and hands each caller its own outcome. Sixteen workers acking
at once cost one round trip and one commit, not sixteen, and each caller still returns only
after the statement carrying its item has committed (rule 6 for steps, fencing for acks).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import anyio

T = TypeVar("T")

# One flush sends at most this many items; the rest wait for the next (bounds statement size).
MAX_BATCH = 500


@dataclass(eq=False)
class Item(Generic[T]):
    """One caller's request and, once flushed, its outcome (`error` set means it raises)."""

    value: T
    key: Hashable
    finished: bool = False
    error: BaseException | None = None
    result: Any = None
    # Set while the caller waits on another caller's flush: woken once, when this item is done
    # (or the flusher left and someone must take over), not on every batch.
    waiter: asyncio.Future[None] | None = None


def _wake(item: Item[Any]) -> None:
    waiter = item.waiter
    if waiter is not None and not waiter.done():
        waiter.set_result(None)


# Runs one batch and settles every item in it (sets `finished`, and `error` or `result`).
Flush = Callable[[Sequence[Item[T]]], Awaitable[None]]


class GroupCommit(Generic[T]):
    """Queue of one kind of write; one flush in flight at a time.

    The caller that finds no flush in flight becomes the flusher and sends batches until the
    queue is empty; every other caller waits on a future of its own (plain asyncio: the
    PostgreSQL driver runs on asyncio, and this is on every ack and step write)."""

    def __init__(self, flush: Flush[T]) -> None:
        self._flush_batch = flush
        self._pending: list[Item[T]] = []
        self._flushing = False

    async def submit(self, value: T, key: Hashable) -> Any:
        """Queue `value` and return its result once its batch committed, or raise the item's
        own error.
        Two items with one `key` never share a batch (one statement cannot write a row twice)."""
        item: Item[T] = Item(value, key)
        self._pending.append(item)
        try:
            while not item.finished:
                if self._flushing:
                    item.waiter = asyncio.get_running_loop().create_future()
                    try:
                        await item.waiter
                    finally:
                        item.waiter = None
                else:
                    await self._flush()
        except BaseException:
            # Cancelled before a flush took it: it must not run later on nobody's behalf.
            if not item.finished and item in self._pending:
                self._pending.remove(item)
            raise
        if item.error is not None:
            raise item.error
        return item.result

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

    async def _flush(self) -> None:
        self._flushing = True
        try:
            while self._pending:
                batch = self._take()
                try:
                    # Shielded: once sent, a batch is seen through, so no waiter is left with
                    # an item whose statement may or may not have committed.
                    with anyio.CancelScope(shield=True):
                        await self._flush_batch(batch)
                except Exception as exc:
                    for item in batch:
                        if not item.finished:
                            item.error, item.finished = exc, True
                finally:
                    for item in batch:
                        _wake(item)
        finally:
            self._flushing = False
            # Normally nothing is left; if this flusher was torn out, a waiter takes over.
            for item in self._pending:
                _wake(item)


def settle_all(
    batch: Sequence[Item[Any]], refused: Callable[[Item[Any]], BaseException | None]
) -> None:
    """Mark every item of `batch` finished, with the error `refused(item)` gives (None: done)."""
    for item in batch:
        item.error = refused(item)
        item.finished = True
