"""Wake-ups across processes: LISTEN on one dedicated connection, polling when that is not possible.

An enqueue that inserts a row sends `pg_notify(channel)` within its insert statement; this
listener turns each notification into an in-process wake-up. It never raises: when the server
is away the listener is simply down, idle workers fall back to their poll interval, and the
next wait tries to listen again. Behind a transaction-pooling PgBouncer LISTEN does not work
at all, so the driver takes `listen=False` and never starts one.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any, Protocol

import anyio
import asyncpg

from engine.clock import Clock
from engine.drivers.postgres.faults import DRIVER_FAILURES
from engine.wake import Waker

# Real time on purpose: how often to knock on a server that is down is network pacing, not job
# time, and a manual test clock that never moves must not stop a reconnect.
_RETRY_LISTEN_S = 1.0


class WakeSignal:
    """The in-process wake-up (kept until a waiter consumes it), counting what it was told."""

    def __init__(self) -> None:
        self._waker = Waker()
        self.count = 0

    def notify(self) -> None:
        self.count += 1
        self._waker.notify()

    async def wait(self, clock: Clock, timeout_ms: int) -> None:
        await self._waker.wait(clock, timeout_ms)


class Signal(Protocol):
    """What a listener tells: a `WakeSignal`, or a `ChangeFeed` (engine/changes.py)."""

    def notify(self) -> None: ...


class NotifyListener:
    """LISTEN `channel` (and the `also` channels) over a connection of its own; each
    notification wakes `signal`."""

    def __init__(
        self,
        url: str,
        channel: str,
        signal: Signal,
        connect_timeout_s: float,
        also: Sequence[str] = (),
    ) -> None:
        self._url = url
        self._channels = (channel, *also)
        self._signal = signal
        self._timeout = connect_timeout_s
        self._conn: asyncpg.Connection[Any] | None = None
        self._next_try = 0.0
        self._closed = False
        # The one connect in flight. A task of its own: a waiter is cancelled whenever its
        # worker frees a slot, and a connect cancelled half-way would be lost (and leak).
        self._connecting: asyncio.Task[None] | None = None

    @property
    def up(self) -> bool:
        return self._conn is not None and not self._conn.is_closed()

    def kick(self) -> None:
        """Start listening in the background unless listening, connecting or backing off."""
        if self.up or self._closed or time.monotonic() < self._next_try:
            return
        if self._connecting is None or self._connecting.done():
            self._connecting = asyncio.get_running_loop().create_task(self._connect())

    async def ensure(self) -> bool:
        """Listen if not already listening; False (never an exception) when it cannot."""
        self.kick()
        connecting = self._connecting
        if connecting is not None and not connecting.done():
            await asyncio.shield(connecting)
        return self.up

    async def _connect(self) -> None:
        try:
            conn: asyncpg.Connection[Any] = await asyncpg.connect(self._url, timeout=self._timeout)
        except DRIVER_FAILURES:
            self._next_try = time.monotonic() + _RETRY_LISTEN_S
            return
        try:
            for channel in self._channels:
                await conn.add_listener(channel, self._on_notify)
        except DRIVER_FAILURES:
            conn.terminate()
            self._next_try = time.monotonic() + _RETRY_LISTEN_S
            return
        conn.add_termination_listener(self._on_terminate)
        if self._closed:  # close() ran while we were connecting
            conn.terminate()
            return
        self._conn = conn
        # Whatever was enqueued while nobody listened went unheard: look now.
        self._signal.notify()

    def _on_notify(self, conn: Any, pid: int, channel: str, payload: object) -> None:
        self._signal.notify()

    def _on_terminate(self, conn: Any) -> None:
        if self._conn is conn:
            self._conn = None
        self._signal.notify()

    async def close(self) -> None:
        self._closed = True
        connecting = self._connecting
        if connecting is not None and not connecting.done():
            with anyio.move_on_after(self._timeout, shield=True):
                await asyncio.shield(connecting)
            connecting.cancel()
        conn, self._conn = self._conn, None
        if conn is not None and not conn.is_closed():
            try:
                await conn.close(timeout=self._timeout)
            except DRIVER_FAILURES:
                conn.terminate()
