"""The PostgreSQL driver's plumbing: options, the asyncpg pool, error conversion, retries, wake-ups.

Nothing here knows what a job is. `PgCore.conn()` hands out a pooled connection and turns every
asyncpg/OS failure raised inside it into `DriverUnavailableError` (chained with `from`); a
connection that broke is closed, never handed out again. `idempotent()` re-runs an operation
that is safe to repeat through a broken connection or a short outage (`retry_deadline_ms`);
`resilient()` holds a settle through a long one (`settle_retry_ms`), and `flush_held()` lets the
held settles through before a claim. Retry deadlines and pauses read `retry_clock`, a monotonic
clock a test can replace.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from types import TracebackType
from typing import TypeVar

import anyio
import asyncpg
from asyncpg.pool import PoolAcquireContext

from engine.clock import SYSTEM_CLOCK, Clock
from engine.drivers.postgres.faults import (
    DRIVER_FAILURES,
    is_connection_failure,
    readiness_fix,
    unavailable,
)
from engine.drivers.postgres.migrate import Conn, InstallFrom
from engine.drivers.postgres.migrate import migrate as run_migrations
from engine.drivers.postgres.sql import check_schema_name, queries
from engine.drivers.postgres.wake import Listener, WakeSignal
from engine.errors import DriverUnavailableError, InvalidArgumentError

T = TypeVar("T")
A = TypeVar("A")

DEFAULT_SCHEMA = "mcp_jobs"
# Connections the driver keeps out of the pool: as many as a busy worker uses at once (its claim
# loop, the ack flush and the step flush), each taken and given back without the pool's
# acquire/release bookkeeping, which costs as much as a small statement. Beyond them, the pool.
_OWN_MAX = 3
# Real time: after an own connection failed to connect, the pool serves alone this long.
_OWN_RETRY_S = 1.0
# Pauses between retries through a lost connection: the first retry goes at once (most often
# one stale connection, and a fresh one just works), then 50 ms doubling up to 1 s.
_FIRST_PAUSE_MS = 50
_LAST_PAUSE_MS = 1_000


class MonotonicClock:
    """Real elapsed time, for retry deadlines and pauses: a restarting server takes seconds of
    wall time whatever the jobs' clock says, and the wall clock may jump."""

    def now_ms(self) -> int:
        return time.monotonic_ns() // 1_000_000

    async def sleep_ms(self, ms: int) -> None:
        await anyio.sleep(max(0, ms) / 1000)


MONOTONIC_CLOCK = MonotonicClock()


def _whole(name: str, value: object, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise InvalidArgumentError(name, value, f"a whole number ≥ {low}")
    return value


async def _keep_session(conn: asyncpg.Connection[asyncpg.Record]) -> None:
    """The pool's reset on release: nothing to undo. asyncpg's default sends UNLISTEN, RESET
    ALL and friends on every release, one more round trip per operation; this driver never
    leaves session state on a pooled connection (no LISTEN, SET, cursors or session locks), and
    the pool still rolls back any transaction left open before calling this."""


class PgCore:
    """Options, pool and the failure rules every PostgreSQL operation shares."""

    kind = "postgres"

    def __init__(
        self,
        url: str,
        *,
        clock: Clock = SYSTEM_CLOCK,
        schema: str = DEFAULT_SCHEMA,
        listen: bool = True,
        pool_min: int = 0,
        pool_max: int = 10,
        statement_cache_size: int = 100,
        connect_timeout_ms: int = 5_000,
        retry_deadline_ms: int = 10_000,
        settle_retry_ms: int = 300_000,
        vacuum_dead_rows: int = 50_000,
        retry_clock: Clock = MONOTONIC_CLOCK,
    ) -> None:
        """`listen=False` polls instead of LISTEN (transaction-pooling PgBouncer; pair it with
        `statement_cache_size=0`). `retry_deadline_ms`: how long an operation that is safe to
        repeat (a read, an enqueue, a heartbeat) keeps retrying through a broken connection or
        an unreachable server before it fails; 0 fails at the first break. `settle_retry_ms`:
        how long an ack/nack/step write is held and retried while the server is unreachable
        (its fence decides, once it gets through, whether it still counts). A process that
        claims vacuums the jobs table when this many dead rows have piled up in it (sweep.py);
        0 leaves the table to autovacuum alone. `retry_clock` times the retries (tests)."""
        check_schema_name(schema)
        _whole("pool_min", pool_min, 0)
        _whole("pool_max", pool_max, max(1, pool_min))
        _whole("statement_cache_size", statement_cache_size, 0)
        _whole("connect_timeout_ms", connect_timeout_ms, 1)
        _whole("retry_deadline_ms", retry_deadline_ms, 0)
        _whole("settle_retry_ms", settle_retry_ms, 0)
        _whole("vacuum_dead_rows", vacuum_dead_rows, 0)
        self.url = url
        self.clock = clock
        self.schema = schema
        self.listen = bool(listen)
        self.q = queries(schema)
        # One channel per schema: two installs in one database do not wake each other.
        self.channel = f"{schema}_wake"
        self._pool_min = pool_min
        self._pool_max = pool_max
        self._statement_cache_size = statement_cache_size
        self._connect_timeout_s = connect_timeout_ms / 1000
        self._retry_deadline_ms = retry_deadline_ms
        self._settle_retry_ms = settle_retry_ms
        self.retry_clock = retry_clock
        self.vacuum_dead_rows = vacuum_dead_rows
        self._pool: asyncpg.Pool[asyncpg.Record] | None = None
        self._pool_lock = anyio.Lock()
        # The connections kept out of the pool (see `conn`): every one, and the free ones.
        self._own: set[asyncpg.Connection[asyncpg.Record]] = set()
        self._own_free: list[asyncpg.Connection[asyncpg.Record]] = []
        self._own_connecting = 0
        self._own_retry_at = 0.0
        self._closed = False
        # Settles held through a lost connection (see `resilient`): how many, the pauses of
        # retries (which `flush_held` cuts short), the event each held try sets, and its last
        # failure.
        self._holding = 0
        self._pausing: set[anyio.CancelScope] = set()
        self._held_tried = asyncio.Event()
        self._held_failure: DriverUnavailableError | None = None
        # Set when a connection could not even be opened (the server was unreachable, not one
        # connection broken); `claim` reads it to spare the leases that outage let run out.
        self.outage_seen = False
        self.signal = WakeSignal()
        self._listener = Listener(url, self.channel, self.signal, self._connect_timeout_s)

    # --- connections --------------------------------------------------------------------------

    async def _get_pool(self) -> asyncpg.Pool[asyncpg.Record]:
        if self._pool is not None:
            return self._pool
        async with self._pool_lock:
            if self._closed:
                raise DriverUnavailableError(
                    "postgres", "this driver was closed", "jobs = await connect(url)"
                )
            if self._pool is None:
                self._pool = await asyncpg.create_pool(
                    self.url,
                    min_size=self._pool_min,
                    max_size=self._pool_max,
                    statement_cache_size=self._statement_cache_size,
                    timeout=self._connect_timeout_s,
                    server_settings={"application_name": "mcp-jobs"},
                    reset=_keep_session,
                )
            return self._pool

    @asynccontextmanager
    async def guard(self) -> AsyncIterator[None]:
        """Convert asyncpg/OS failures raised inside into `DriverUnavailableError`."""
        try:
            yield
        except DRIVER_FAILURES as exc:
            raise unavailable(exc, self.url, self.schema) from exc

    def conn(self) -> _Borrowed:
        """A connection for one operation (`async with core.conn() as conn`); failures inside
        come out as `DriverUnavailableError`.

        One of the driver's own connections when one is free (or may be opened), else one
        from the pool: the few callers a process runs at once (a producer enqueuing one job at
        a time, a worker's claims, acks and steps) then skip the pool's acquire/release
        bookkeeping, which costs as much as a small statement."""
        return _Borrowed(self)

    async def on_conn(self, op: Callable[[Conn, A], Awaitable[T]], arg: A) -> T:
        """`op(conn, arg)` on a connection held for the call: `async with self.conn()` for the
        hottest single statements. With an own connection free, it skips the context manager's
        two coroutines (2.2 µs of a 15 µs single enqueue's Python, measured)."""
        own = self._take_free_own()
        if own is None:
            async with self.conn() as conn:
                return await op(conn, arg)
        try:
            result = await op(own, arg)
        except BaseException as exc:
            self._release_own(own, exc)
            raise
        self._release_own(own, None)
        return result

    def _release_own(
        self, conn: asyncpg.Connection[asyncpg.Record], exc: BaseException | None
    ) -> None:
        """Give `conn` back after an operation that raised `exc` (None: it did not); a
        driver failure, from either, comes out as `DriverUnavailableError`."""
        try:
            self._give_back_own(conn, clean=_clean(exc))
        except DRIVER_FAILURES as failure:
            raise unavailable(failure, self.url, self.schema) from failure
        if isinstance(exc, DRIVER_FAILURES):
            raise unavailable(exc, self.url, self.schema) from exc

    def _take_free_own(self) -> asyncpg.Connection[asyncpg.Record] | None:
        """A free own connection that is open (taken), without a coroutine: the common path."""
        free = self._own_free
        while free and not self._closed:
            conn = free.pop()
            if not conn.is_closed():
                return conn
            self._own.discard(conn)
        return None

    async def _open_own(self) -> asyncpg.Connection[asyncpg.Record] | None:
        """A newly opened own connection (taken), when none is free and there is room."""
        if self._closed or len(self._own) + self._own_connecting >= _OWN_MAX:
            return None
        if time.monotonic() < self._own_retry_at:
            return None
        self._own_connecting += 1
        try:
            conn = await asyncpg.connect(
                self.url,
                statement_cache_size=self._statement_cache_size,
                timeout=self._connect_timeout_s,
                server_settings={"application_name": "mcp-jobs"},
            )
        except DRIVER_FAILURES:
            # The pool will try (and report) for this call; back off before trying again.
            self._own_retry_at = time.monotonic() + _OWN_RETRY_S
            return None
        finally:
            self._own_connecting -= 1
        if self._closed:
            conn.terminate()
            return None
        self._own.add(conn)
        return conn

    def _give_back_own(self, conn: asyncpg.Connection[asyncpg.Record], clean: bool) -> None:
        """Return a taken own connection. One that was interrupted (a cancellation may land
        mid-statement), broke (its session was ended under it: asyncpg may not have seen the
        socket close yet, and reusing it fails mid-protocol) or was left inside a transaction
        has an unknown session: it is closed, never reused. An ordinary error raised between
        statements (a refused duplicate, an invalid item of a batch) leaves the session as it
        was."""
        if clean and not self._closed and conn in self._own and not conn.is_in_transaction():
            self._own_free.append(conn)
        else:
            self._own.discard(conn)
            conn.terminate()

    async def idempotent(self, op: Callable[[Conn], Awaitable[T]]) -> T:
        """Run `op` on a connection; through a broken connection or an unreachable server, run
        it again on a fresh one, pausing between tries, for up to `retry_deadline_ms`.

        Only for operations whose second run changes nothing the first did not (reads,
        upserts of the same values, fenced writes)."""

        async def once(first: bool) -> T:
            async with self.conn() as conn:
                return await op(conn)

        return await self.retrying(once)

    async def retrying(self, op: Callable[[bool], Awaitable[T]]) -> T:
        """`idempotent` for an operation that wants to know whether this is its first try
        (`op(first_try)`): a later try may find what an earlier, broken one committed."""
        return await self._retry(op, self._retry_deadline_ms, held=False)

    async def resilient(self, op: Callable[[bool], Awaitable[T]]) -> T:
        """Run the settle `op(first_try)`; while the server cannot be reached, hold it and run
        it again (`first_try=False`, so it can check whether a broken try committed) for up to
        `settle_retry_ms`. Its fence (the lease token) decides once a try gets through: no
        other worker can take the job while the server is unreachable, and none that saw the
        outage takes it over for a lease after (`claim`), so the settle still counts."""
        return await self._retry(op, self._settle_retry_ms, held=True)

    async def _retry(self, op: Callable[[bool], Awaitable[T]], deadline_ms: int, held: bool) -> T:
        clock = self.retry_clock
        started = 0
        pause = 0
        tries = 0
        holding = False
        try:
            while True:
                tries += 1
                try:
                    return await op(tries == 1)
                except DriverUnavailableError as exc:
                    if self._closed or not is_connection_failure(exc) or deadline_ms == 0:
                        raise
                    now = clock.now_ms()
                    if tries == 1:
                        started = now
                    left = started + deadline_ms - now
                    if left <= 0:
                        raise self._gave_up(exc, now - started, tries) from (exc.__cause__ or exc)
                    if held:
                        if not holding:
                            holding = True
                            self._holding += 1
                        self._held_failure = exc
                        self._held_tried_now()
                # The last try goes at the deadline itself.
                await self._pause(min(pause, left))
                pause = min(max(pause * 2, _FIRST_PAUSE_MS), _LAST_PAUSE_MS)
        finally:
            if holding:
                self._holding -= 1
                self._held_tried_now()

    def _gave_up(
        self, last: DriverUnavailableError, tried_ms: int, tries: int
    ) -> DriverUnavailableError:
        cause = last.__cause__ if last.__cause__ is not None else last
        detail = str(cause).strip() or type(cause).__name__
        error = DriverUnavailableError(
            "postgres",
            f"cannot reach the server: gave up after {tries} tries over {tried_ms / 1000:.1f} s "
            f"(last error {type(cause).__name__}: {detail})",
            readiness_fix(self.url),
        )
        error.details = {**(error.details or {}), "tried_ms": tried_ms, "tries": tries}
        return error

    async def _pause(self, ms: int) -> None:
        """Wait `ms` on the retry clock, or until `flush_held` asks the held settles to go. The
        sleep starts in this task, before it yields: a clock moved meanwhile cannot skip it."""
        if ms <= 0:
            await anyio.lowlevel.checkpoint()
            return
        with anyio.CancelScope() as scope:
            self._pausing.add(scope)
            try:
                await self.retry_clock.sleep_ms(ms)
            finally:
                self._pausing.discard(scope)

    def _retry_now(self) -> None:
        for scope in self._pausing:
            scope.cancel()

    def _held_tried_now(self) -> None:
        self._held_tried.set()
        self._held_tried = asyncio.Event()

    async def flush_held(self) -> None:
        """Before a claim: settles held through an outage go first. Each is tried now; the
        claim waits until none is held, and fails as they do while the server stays away."""
        while self._holding and not self._closed:
            self._held_failure = None
            tried = self._held_tried
            self._retry_now()
            await tried.wait()
            failure = self._held_failure
            if failure is not None and self._holding:
                raise DriverUnavailableError(
                    "postgres",
                    f"{self._holding} settle(s) held through a lost connection could not be "
                    f"written yet, so nothing is claimed ({failure.cause})",
                    readiness_fix(self.url),
                ) from failure.__cause__

    # --- lifecycle ----------------------------------------------------------------------------

    async def migrate(self) -> None:
        await self.migrate_with()

    async def migrate_with(self, install_from: InstallFrom = "schema") -> list[int]:
        """`migrate()`, choosing how a fresh database is built (tests compare the two roads)."""
        async with self.conn() as conn:
            return await run_migrations(
                conn, self.schema, self.clock.now_ms(), install_from=install_from
            )

    async def close(self) -> None:
        self._closed = True
        self._retry_now()  # retries stop waiting: they fail at their next try
        await self._listener.close()
        own, free = self._own, set(self._own_free)
        self._own, self._own_free = set(), []
        for conn in own:
            if conn in free:
                await self._close_or_terminate(conn)
            else:
                conn.terminate()  # mid-operation in another task: that task sees it closed
        pool, self._pool = self._pool, None
        if pool is not None:
            await self._close_or_terminate(pool)
        self.signal.notify()

    async def _close_or_terminate(
        self, closing: asyncpg.Pool[asyncpg.Record] | asyncpg.Connection[asyncpg.Record]
    ) -> None:
        """A graceful close, bounded and shielded from the caller's cancellation; a hard
        terminate when the server does not answer in time or the close fails."""
        with anyio.move_on_after(self._connect_timeout_s, shield=True) as scope:
            try:
                await closing.close()
            except DRIVER_FAILURES:
                closing.terminate()
        if scope.cancelled_caught:
            closing.terminate()

    # --- wake-ups -----------------------------------------------------------------------------

    async def start_listening(self) -> bool:
        """Listen for other processes' enqueues now; False when `listen=False` or the server is
        away (waits then poll)."""
        if not self.listen or self._closed:
            return False
        return await self._listener.ensure()

    async def wait_for_work(self, timeout_ms: int) -> None:
        if self._closed:
            return
        if self.listen:
            self._listener.kick()  # never waits for the connect: polling covers until it is up
        await self.signal.wait(self.clock, timeout_ms)


class _Borrowed:
    """One operation's hold on a connection: see `PgCore.conn`. A class, not a generator-based
    context manager, because every statement the driver runs goes through one; this costs a
    fraction of contextlib's machinery on the path of a single enqueue or claim."""

    __slots__ = ("_core", "_own", "_pooled")

    def __init__(self, core: PgCore) -> None:
        self._core = core
        self._own: asyncpg.Connection[asyncpg.Record] | None = None
        self._pooled: PoolAcquireContext[asyncpg.Record] | None = None

    async def __aenter__(self) -> Conn:
        core = self._core
        own = core._take_free_own()
        if own is not None:
            self._own = own
            return own
        try:
            own = await core._open_own()
            if own is not None:
                self._own = own
                return own
            self._pooled = (await core._get_pool()).acquire()
            return await self._pooled.__aenter__()
        except DRIVER_FAILURES as exc:
            if is_connection_failure(exc):
                core.outage_seen = True
            raise unavailable(exc, core.url, core.schema) from exc

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        core = self._core
        if self._own is not None:
            core._release_own(self._own, exc)
            return
        try:
            if self._pooled is not None:
                if _broken(exc) and self._pooled.connection is not None:
                    # The pool's release does not test a connection: close it, so the pool
                    # opens a fresh one instead of handing this one out mid-protocol.
                    self._pooled.connection.terminate()
                await self._pooled.__aexit__(exc_type, exc, tb)
        except DRIVER_FAILURES as failure:
            raise unavailable(failure, core.url, core.schema) from failure
        if isinstance(exc, DRIVER_FAILURES):
            raise unavailable(exc, core.url, core.schema) from exc


def _broken(exc: BaseException | None) -> bool:
    return exc is not None and is_connection_failure(exc)


def _clean(exc: BaseException | None) -> bool:
    """Whether a connection whose operation ended with `exc` may be used again: not after a
    cancellation (it may have landed mid-statement) nor once it broke."""
    return exc is None or (isinstance(exc, Exception) and not is_connection_failure(exc))
