"""How a worker's loops beside its jobs (its presence beat and lease heartbeats, the cron
scheduler, the outbox relay, the pruner) meet a pass that fails: logged, and tried again at the
next. A failure never ends the worker, which would stop its jobs too (and, restarted, meet the
same failure again). Inside a worker's run, its outage record says it (engine/worker_outage.py):
once when the database goes away, not at every pass.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio

from engine.clock import Clock, sleep_unless_woken
from engine.errors import JobsError
from engine.worker_outage import noted_failure, noted_success

T = TypeVar("T")


async def attempt(what: str, log: logging.Logger, run: Callable[[], Awaitable[T]]) -> T | None:
    """`run()`'s answer, or None when it failed: a typed error (the database away, say) as a
    warning, anything else with its traceback, since it is a defect to report."""
    try:
        answer = await run()
    except JobsError as exc:
        if not noted_failure(what, exc):
            log.warning("%s failed, retrying: %s", what, exc)
        return None
    except Exception:
        log.exception("%s failed unexpectedly, retrying", what)
        return None
    noted_success(what)
    return answer


class ServiceLoop(ABC):
    """One of those loops: `run()` takes turns until `stop()`, which also cuts a sleep short;
    on the way out it hands back what it holds (`_release`, shielded from the cancel that may
    end it); `rearm()` readies it for its worker's next run."""

    clock: Clock

    def __init__(self) -> None:
        self._stopping = False
        self._wake = anyio.Event()
        self._done = anyio.Event()

    @abstractmethod
    async def _turn(self) -> None:
        """One pass and the wait after it."""

    async def _release(self) -> None:  # noqa: B027 - a loop that leads nothing hands back nothing
        """What the loop leads (a lease) goes back, so a peer takes over at once."""

    async def run(self) -> None:
        try:
            while not self._stopping:
                await self._turn()
        finally:
            with anyio.CancelScope(shield=True):
                await self._release()
            self._done.set()

    def stop(self) -> None:
        self._stopping = True
        self._wake.set()

    def rearm(self) -> None:
        """Make a stopped loop runnable again (between its worker's runs only)."""
        self._stopping = False
        self._wake = anyio.Event()
        self._done = anyio.Event()

    async def wait_stopped(self) -> None:
        await self._done.wait()

    async def _sleep(self, ms: int) -> None:
        """`ms` of clock time, or until `stop()`."""
        if self._stopping or ms <= 0:
            await anyio.lowlevel.checkpoint()
            return
        await sleep_unless_woken(self.clock, ms, self._wake)
