"""Injected time. Every reading of time in the engine goes through a `Clock` (rule 9)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import anyio

logger = logging.getLogger(__name__)


class Clock(Protocol):
    def now_ms(self) -> int: ...

    async def sleep_ms(self, ms: int) -> None:
        """Wait until `ms` milliseconds of THIS clock's time have passed."""
        ...


class SystemClock:
    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    async def sleep_ms(self, ms: int) -> None:
        await anyio.sleep(max(0, ms) / 1000)


class ServerClock:
    """A machine's clock read as a database server reads its own. Many machines share one
    database, and a lease, a due time or a worker's last beat written by one is compared by
    another: a machine whose clock ran a minute fast took over every lease still held elsewhere
    and ran those jobs twice. So `local` is read moved by the offset last measured against the
    server, when that offset is AGREES_WITHIN_MS or more; within it, `local` is read as it is,
    and the processes of one machine read one clock to the millisecond, as before any measure
    (a measure is off by up to half its round trip). Durations (`sleep_ms`) are `local`'s."""

    def __init__(self, local: Clock, server: str) -> None:
        self.local = local
        self.server = server
        # How far the server's clock is ahead of `local`, at the last measure.
        self.offset_ms = 0
        self.measured = False
        self.tried = False  # a measure was begun (it may have failed)
        self._correction = 0
        self._noted = 0
        self._began_ms = 0  # `local`'s reading when the last measure began
        # The driver's measure, set once it has a server to read (`agree`).
        self.keep: Callable[[], Awaitable[None]] | None = None
        self._first: anyio.Event | None = None  # set when the first `agree` measure ends
        # Read several times on every job's path: bound once.
        self._local_ms = local.now_ms

    def now_ms(self) -> int:
        return self._local_ms() + self._correction

    async def sleep_ms(self, ms: int) -> None:
        await self.local.sleep_ms(ms)

    async def measure(self, read_server_ms: Callable[[], Awaitable[int]]) -> None:
        """Read the server's time now (`read_server_ms`, one round trip), taken as read halfway
        through it; the offset is logged when it moved by NOTED_OFFSET_MS since last logged. A
        round trip slower than SLOW_ROUND_TRIP_MS (a pause here, a loaded server; or a step of
        `local` during it) keeps the measure before: it could be that far off."""
        self.tried = True
        self._began_ms = self.local.now_ms()
        offset, round_trip = await measure_offset(read_server_ms, self.local)
        if self.measured and not 0 <= round_trip <= SLOW_ROUND_TRIP_MS:
            return
        self.offset_ms = offset
        self._correction = offset if abs(offset) >= AGREES_WITHIN_MS else 0
        self.measured = True
        if abs(offset - self._noted) >= NOTED_OFFSET_MS:
            self._noted = offset
            logger.warning("%s: %s", self.server, offset_words(offset, round_trip))

    def due(self) -> bool:
        """No measure begun yet, or REMEASURE_MS of `local`'s time since the last began."""
        return not self.tried or abs(self._local_ms() - self._began_ms) >= REMEASURE_MS

    async def agree(self) -> None:
        """Measure the server's clock by the driver's `keep` when one is due, before a reading
        another machine will compare: a process that only enqueues or operates (no worker, no
        migrate) keeps the server's time too. Callers that find the first measure under way
        wait for it; later measures are not waited for (the offset before stands meanwhile)."""
        keep = self.keep
        if keep is None:
            return
        if not self.due():
            if self._first is not None:
                await self._first.wait()
            return
        self.tried = True
        self._began_ms = self._local_ms()
        first = None if self.measured else anyio.Event()
        if first is not None:
            self._first = first
        try:
            await keep()
        finally:
            if first is not None:
                first.set()
                self._first = None


# An offset this large is worth an operator's attention: the machine's time is wrong.
NOTED_OFFSET_MS = 1_000
# Within this, this machine's clock is read as the server's (a measure is off by up to half its
# round trip; a lease is seconds).
AGREES_WITHIN_MS = 250
SLOW_ROUND_TRIP_MS = 1_000
# A process that does not beat (a producer, an operator) measures again after this: clocks
# drift, and NTP steps them.
REMEASURE_MS = 60_000


async def measure_offset(
    read_server_ms: Callable[[], Awaitable[int]], local: Clock | None = None
) -> tuple[int, int]:
    """How far the server's clock is ahead of this machine's (`local`, else the system clock),
    and the round trip it was measured over: the server's reading is taken as made halfway,
    so the offset is off by at most half the round trip."""
    here = local or SYSTEM_CLOCK
    sent = here.now_ms()
    server = await read_server_ms()
    received = here.now_ms()
    return server - (sent + received) // 2, received - sent


async def offset_line(read_server_ms: Callable[[], Awaitable[int]]) -> str:
    """The `clock:` line of a `db report`."""
    return "clock: " + offset_words(*await measure_offset(read_server_ms))


def offset_words(offset: int, round_trip_ms: int) -> str:
    """What an offset measured against the database server means, for a log line or a report:
    agreement within AGREES_WITHIN_MS (read as it is), else the offset mcp-jobs corrects."""
    if abs(offset) < AGREES_WITHIN_MS:
        return (
            f"this machine's clock agrees with the database server's ({abs(offset)} ms apart, "
            f"measured to within {max(1, round_trip_ms // 2)} ms)"
        )
    side = "ahead of" if offset < 0 else "behind"
    return (
        f"this machine's clock reads {abs(offset) / 1000:.1f} s {side} the database server's; "
        "mcp-jobs here follows the server's clock (leases, due times, records), but other "
        "programs on this machine read the wrong time: set it (NTP)"
    )


async def agree(clock: Clock) -> None:
    """`ServerClock.agree` when `clock` is one; any other clock has no server to agree with."""
    if isinstance(clock, ServerClock):
        await clock.agree()


def sleeps_in_real_time(clock: Clock) -> bool:
    """Whether `clock.sleep_ms` is the event loop's own sleep (a `SystemClock`, or a
    `ServerClock` over one): a wait bounded by it may then be the loop's own timeout."""
    while isinstance(clock, ServerClock):
        clock = clock.local
    return type(clock).sleep_ms is SystemClock.sleep_ms


def server_clock(clock: Clock, server: str) -> Clock:
    """`clock` read as `server` reads time when it is this machine's wall clock (a
    `SystemClock`); any other clock (a test's) as it is."""
    return ServerClock(clock, server) if isinstance(clock, SystemClock) else clock


class ManualClock:
    """A clock that moves only when a test moves it; sleepers wake when it passes their time."""

    def __init__(self, start_ms: int = 1_767_225_600_000) -> None:  # 2026-01-01T00:00:00Z
        self._now = start_ms
        self._sleepers: list[tuple[int, anyio.Event]] = []

    def now_ms(self) -> int:
        return self._now

    async def sleep_ms(self, ms: int) -> None:
        if ms <= 0:
            await anyio.lowlevel.checkpoint()
            return
        event = anyio.Event()
        self._sleepers.append((self._now + ms, event))
        await event.wait()

    def advance(self, ms: int) -> None:
        self.set(self._now + ms)

    def set(self, now_ms: int) -> None:
        self._now = now_ms
        due = [s for s in self._sleepers if s[0] <= now_ms]
        self._sleepers = [s for s in self._sleepers if s[0] > now_ms]
        for _, event in due:
            event.set()


class MonotonicClock:
    """Real elapsed time, for retry deadlines and pauses: a restarting server takes seconds of
    wall time whatever the jobs' clock says, and the wall clock may jump."""

    def now_ms(self) -> int:
        return time.monotonic_ns() // 1_000_000

    async def sleep_ms(self, ms: int) -> None:
        await anyio.sleep(max(0, ms) / 1000)


SYSTEM_CLOCK = SystemClock()
MONOTONIC_CLOCK = MonotonicClock()


def next_retry_pause_ms(previous_ms: int) -> int:
    """The pause before a driver's next try through a lost connection, after `previous_ms`:
    50 ms doubling up to 1 s (from 0, the first pause is 50 ms)."""
    return min(max(previous_ms * 2, 50), 1_000)


class _Wake(Protocol):
    """An asyncio or an anyio event."""

    def is_set(self) -> bool: ...

    async def wait(self) -> Any: ...


async def sleep_unless_woken(clock: Clock, ms: int, wake: _Wake) -> None:
    """Wait `ms` of `clock`'s time, or less if `wake` is set first (new work, a stop)."""
    if wake.is_set():
        return
    if sleeps_in_real_time(clock):
        # The loop's own timeout: no timer task to start and then cancel on every wake-up
        # (a task group's cost doubled an idle worker's wake-up to its claim).
        try:
            async with asyncio.timeout(max(0, ms) / 1000):
                await wake.wait()
        except TimeoutError:
            pass
        return
    async with anyio.create_task_group() as tg:

        async def timer() -> None:
            await clock.sleep_ms(ms)
            tg.cancel_scope.cancel()

        tg.start_soon(timer)
        await wake.wait()
        tg.cancel_scope.cancel()
