"""How the worker's loop waits, and what wakes it: a freed slot ends a wait for a slot, and a poke
(stop(), a crashed job, a reserved rate-limit start, a full cap's slot freed) ends a wait of
either kind."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping

import anyio

from engine.clock import Clock
from engine.run_job import RunHandle

logger = logging.getLogger("mcp_jobs.worker")


class LoopWake:
    def __init__(self) -> None:
        # asyncio's own event: the engine runs on asyncio (the PostgreSQL driver needs it), and
        # an anyio.Event costs a backend lookup on every job that ends.
        self._nudge = asyncio.Event()
        # Whether anyone waits on `_nudge`: a freed slot with no one waiting (the common case
        # under a backlog) spends no event.
        self._nudge_awaited = False
        # The loop's wait for work while it waits; a poke takes it (and cancels it).
        self._idle_scope: anyio.CancelScope | None = None

    @property
    def waiting_for_work(self) -> bool:
        return self._idle_scope is not None

    def poke(self) -> None:
        """Wake the loop wherever it waits."""
        self.slot_freed()
        scope, self._idle_scope = self._idle_scope, None
        if scope is not None:
            scope.cancel()

    def slot_freed(self) -> None:
        """Wake the loop if it waits for a slot (or for the last in-flight job to settle). A loop
        waiting for work sleeps on: its last claim found less than it had room for, and a freed
        slot makes no new work (new work sends its own wake-up), so waking it would cost an
        empty claim after every job of a quiet queue."""
        if self._nudge_awaited:
            self._nudge_awaited = False
            self._nudge.set()
            self._nudge = asyncio.Event()

    async def slot(self) -> None:
        """Wait for a freed slot or a poke."""
        self._nudge_awaited = True
        await self._nudge.wait()

    async def work(self, wait: Callable[[], Awaitable[None]]) -> None:
        """Wait for `wait` to return, or a poke. A poke cancels the wait's scope, which ends only
        that wait; a cancellation from outside still propagates."""
        with anyio.CancelScope() as scope:
            self._idle_scope = scope
            try:
                await wait()
            finally:
                self._idle_scope = None


async def drained(
    clock: Clock, deadline_ms: int, inflight: Mapping[str, RunHandle], wake: LoopWake
) -> None:
    """A stopping worker's drain: wait for the jobs in flight to settle (each one's end frees a
    slot); at `deadline_ms` (from the stop() call, epoch ms) stop the bodies still running, which
    hand their jobs back."""
    if not inflight:
        return
    async with anyio.create_task_group() as tg:

        async def deadline() -> None:
            await clock.sleep_ms(deadline_ms - clock.now_ms())
            # Said: through an outage the hand-backs wait for the database, and so does the exit.
            logger.warning(
                "drain deadline: handing back %d job(s) still in flight; a hand-back the "
                "database does not take yet waits for it, and a second stop (Ctrl-C, SIGTERM) "
                "leaves them to their leases",
                len(inflight),
            )
            for handle in list(inflight.values()):
                handle.stop("drain")

        async def settled() -> None:
            while inflight:
                await wake.slot()
            tg.cancel_scope.cancel()

        tg.start_soon(deadline)
        tg.start_soon(settled)
