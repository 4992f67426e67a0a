"""The PostgreSQL driver's plumbing: options, the asyncpg pool, error conversion, retries, wake-ups.

Nothing here knows what a job is. `PgCore.conn()` hands out a pooled connection and turns every
asyncpg/OS failure raised inside it into `DriverUnavailableError` (chained with `from`);
`resilient()` re-runs a settle that a broken connection interrupted, for as long as the server
needs to come back.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from types import TracebackType
from typing import TypeVar

import anyio
import asyncpg
from asyncpg.pool import PoolAcquireContext

from engine.clock import SYSTEM_CLOCK, Clock
from engine.drivers.postgres.faults import DRIVER_FAILURES, is_connection_failure, unavailable
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
        settle_retry_ms: int = 30_000,
        vacuum_dead_rows: int = 50_000,
    ) -> None:
        """`listen=False` polls instead of LISTEN (transaction-pooling PgBouncer; pair it with
        `statement_cache_size=0`). `settle_retry_ms` is how long an ack/nack/step write keeps
        retrying through a lost connection before it gives up. A process that claims vacuums
        the jobs table when this many dead rows have piled up in it (sweep.py); 0 leaves the
        table to autovacuum alone."""
        check_schema_name(schema)
        _whole("pool_min", pool_min, 0)
        _whole("pool_max", pool_max, max(1, pool_min))
        _whole("statement_cache_size", statement_cache_size, 0)
        _whole("connect_timeout_ms", connect_timeout_ms, 1)
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
        self._settle_retry_s = settle_retry_ms / 1000
        self.vacuum_dead_rows = vacuum_dead_rows
        self._pool: asyncpg.Pool[asyncpg.Record] | None = None
        self._pool_lock = anyio.Lock()
        # The connections kept out of the pool (see `conn`): every one, and the free ones.
        self._own: set[asyncpg.Connection[asyncpg.Record]] = set()
        self._own_free: list[asyncpg.Connection[asyncpg.Record]] = []
        self._own_connecting = 0
        self._own_retry_at = 0.0
        self._closed = False
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
            self._give_back_own(conn, clean=exc is None or isinstance(exc, Exception))
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
        mid-statement) or left inside a transaction has an unknown session: it is closed, never
        reused. An ordinary error raised between statements (a refused duplicate, an invalid
        item of a batch) leaves the session as it was."""
        if clean and not self._closed and conn in self._own and not conn.is_in_transaction():
            self._own_free.append(conn)
        else:
            self._own.discard(conn)
            conn.terminate()

    async def idempotent(self, op: Callable[[Conn], Awaitable[T]]) -> T:
        """Run `op` on a connection, once more on a fresh one if the first was broken.

        Only for operations whose second run changes nothing the first did not (reads,
        upserts of the same values): after a server restart the pool can still hold a
        connection whose session ended, and the caller should not pay for that."""
        try:
            async with self.conn() as conn:
                return await op(conn)
        except DriverUnavailableError as exc:
            if self._closed or not is_connection_failure(exc):
                raise
        async with self.conn() as conn:
            return await op(conn)

    async def resilient(self, op: Callable[[bool], Awaitable[T]]) -> T:
        """Run `op(first_try)`; while it fails on a broken connection, wait and run it again
        (with `first_try=False`, so it can check whether the broken try committed)."""
        # Real time: a restarting server takes seconds of wall time whatever the job clock says.
        deadline = time.monotonic() + self._settle_retry_s
        pause = 0.05
        first = True
        while True:
            try:
                return await op(first)
            except DriverUnavailableError as exc:
                if self._closed or not is_connection_failure(exc):
                    raise
                if time.monotonic() + pause > deadline:
                    raise
            first = False
            await anyio.sleep(pause)
            pause = min(pause * 2, 1.0)

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
                await self._pooled.__aexit__(exc_type, exc, tb)
        except DRIVER_FAILURES as failure:
            raise unavailable(failure, core.url, core.schema) from failure
        if isinstance(exc, DRIVER_FAILURES):
            raise unavailable(exc, core.url, core.schema) from exc
