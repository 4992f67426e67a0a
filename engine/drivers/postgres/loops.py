"""The event loop a PostgreSQL client belongs to, and the refusal of a call from another one.

asyncpg binds every connection (and the pool) to the loop that opened it; used from another
loop it fails with a bare RuntimeError, or, worse, half-way through a statement. A client takes
the loop it was created on (or, made outside one, its first call's) and refuses every call from
another: one identity check per operation.
"""

from __future__ import annotations

import asyncio

from engine.drivers.urls import without_password
from engine.errors import JobsError


class DriverOtherLoopError(JobsError):
    code = "DRIVER_OTHER_LOOP"
    title = "the client was used from another event loop than the one it was created on"

    def __init__(self, url: str, *, ended: bool) -> None:
        """`ended`: the client's own loop is closed (its asyncio.run() returned)."""
        own = "an event loop that has since ended" if ended else "another event loop"
        super().__init__(
            f"postgres: this client was created on {own}, not the one running this call (a "
            "thread with a loop of its own, or asyncio.run() per request with a client made "
            "once); asyncpg's connections belong to the loop that opened them, so the "
            "client does too: create a client on each loop that uses it, or use it from its own "
            "loop (asyncio.run_coroutine_threadsafe(jobs.enqueue(name, input), its_loop))",
            f"async with await connect({without_password(url)!r}) as jobs: "
            "await jobs.enqueue(name, input)",
            details={"driver": "postgres", "own_loop_ended": ended},
        )


def running_loop() -> asyncio.AbstractEventLoop | None:
    """The loop running this thread's code, or None outside one."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class LoopOwner:
    """Remembers the loop a client belongs to; `check` refuses a call from any other."""

    __slots__ = ("loop", "url")

    def __init__(self, url: str) -> None:
        self.url = url
        self.loop = running_loop()

    def check(self) -> None:
        """Raise DRIVER_OTHER_LOOP unless called on the client's own loop (its first, when it
        was created outside one)."""
        running = asyncio.get_running_loop()
        if running is not self.loop:
            self._other(running)

    def _other(self, running: asyncio.AbstractEventLoop) -> None:
        if self.loop is None:
            self.loop = running
            return
        raise DriverOtherLoopError(self.url, ended=self.loop.is_closed())
