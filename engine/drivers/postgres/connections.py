"""The PostgreSQL driver's connections: the asyncpg pool, a few connections of its own, failure
conversion, and the retry policy every operation shares.

Nothing here knows what a job is. `Connections.conn()` hands out a connection and turns every
asyncpg/OS failure raised inside it into `DriverUnavailableError` (chained with `from`); a
connection that broke is closed, never handed out again. `idempotent()` re-runs an operation
that is safe to repeat through a broken connection or a short outage (retry.py); `atomic()` re-runs
one that is not only when the server rolled its transaction back.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from types import TracebackType
from typing import TypeVar

import anyio
import asyncpg
from asyncpg.pool import PoolAcquireContext

from engine.driver_errors import DriverClosedError, StoreDamagedError
from engine.drivers.damage import UndecodableRow
from engine.drivers.lease_grace import LeaseGrace
from engine.drivers.postgres.faults import (
    DRIVER_FAILURES,
    damaged,
    is_connection_failure,
    unavailable,
)
from engine.drivers.postgres.install_refusals import SchemaTaken, refusal
from engine.drivers.postgres.loops import LoopOwner
from engine.drivers.postgres.migrate import InstallFrom
from engine.drivers.postgres.migrate import migrate as run_migrations
from engine.drivers.postgres.own_connections import Connection, OwnConnections
from engine.drivers.postgres.retry import Retrier
from engine.drivers.postgres.schema_version import Conn
from engine.drivers.postgres.sql import queries
from engine.drivers.urls import split_schema

T = TypeVar("T")

# Kept because a single enqueue runs a third faster on them than through the pool's
# acquire/release: connections held out of the pool, as many as a busy process uses at once
# (a producer's enqueues, a worker's ack flush and step flush). Beyond them, the pool.
_OWN_MAX = 3
# The statements planned once (one generic plan, kept): the claim and the stats, each written so
# that its generic plan is right whatever the values (queries.sql), and planning either anew
# costs a good part of running it. One per worker loop claiming at once in this process; more
# claimers, and a stats read while both claim, share the general ones.
_PLANNED_ONCE_MAX = 2
# Their plans never scan a table whole: a plan is kept while the tables grow, and one made while
# a table was small (a new deployment's first claim, with no steps stored yet) would scan it on
# every run from then on. Each statement here has an index for every table it reads.
PLANNED_ONCE_SETTINGS = {
    "plan_cache_mode": "force_generic_plan",
    "enable_seqscan": "off",
    "enable_bitmapscan": "off",
}
# The reads planned for their values every time (custom plans): the filtered lists, whose
# right plan depends on how many rows the filter matches. On a cached statement the server
# switches to one generic plan after five runs when it looks no dearer, and for a list that plan
# could walk the whole history to find a rare name. As many as a process lists at once, commonly;
# beyond them, any connection, with the statement prepared anew (`fetch_for_values`).
_FOR_VALUES_MAX = 2
_FOR_VALUES_SETTINGS = {"plan_cache_mode": "force_custom_plan"}
# Every session of the driver's: its statements are written for READ COMMITTED, and a database
# whose default is stricter (REPEATABLE READ, SERIALIZABLE) would only roll back overlapping
# claims and acks (retry.py runs them again, at a cost). Not sent through a transaction pooler
# (no statement cache), which refuses startup parameters it does not know.
_SESSION_SETTINGS = {
    "application_name": "mcp-jobs",
    "default_transaction_isolation": "read committed",
}
_POOLER_SETTINGS = {"application_name": "mcp-jobs"}


async def _keep_session(conn: asyncpg.Connection[asyncpg.Record]) -> None:
    """The pool's reset on release: nothing to undo. asyncpg's default sends UNLISTEN, RESET
    ALL and friends on every release, one more round trip per operation; this driver never
    leaves session state on a pooled connection (no LISTEN, SET, cursors or session locks), and
    the pool still rolls back any transaction left open before calling this."""


class Connections:
    """Pool, own connections and the failure rules every PostgreSQL operation shares."""

    def __init__(
        self,
        url: str,
        *,
        schema: str,
        pool_min: int,
        pool_max: int,
        statement_cache_size: int,
        connect_timeout_ms: int,
        retry: Retrier,
    ) -> None:
        self.url = url
        # What asyncpg reads: the URL without this package's own `?schema=`.
        self.dsn = split_schema(url)[0]
        self.schema = schema
        self.q = queries(schema)
        # One wake-up channel per schema: two installs in one database do not wake each other.
        self.channel = f"{schema}_wake"
        # Settles notify here, for readers that follow state (engine/changes.py), not the wake-up
        # channel: an ack must not wake every idle worker. Within NAMEDATALEN (schema ≤ 58).
        self.changes_channel = f"{schema}_chg"
        # Whether some process follows changes (its `followers:` lease is live), as this
        # process's last presence beat read it: settles NOTIFY only then (queries.sql ack_many).
        self.changes_followed = False
        self.retry = retry
        self.pool_max = pool_max
        self._pool_min = pool_min
        self._statement_cache_size = statement_cache_size
        self.connect_timeout_s = connect_timeout_ms / 1000
        self.pool: asyncpg.Pool[asyncpg.Record] | None = None
        self._pool_lock = anyio.Lock()

        # Without a statement cache (PgBouncer in transaction mode) nothing is planned once and
        # every statement is planned for its values, and such a pooler refuses a startup
        # parameter like plan_cache_mode: no planned-once set, no list set.
        cached = statement_cache_size > 0
        self._session = _SESSION_SETTINGS if cached else _POOLER_SETTINGS

        # The connections kept out of the pool (see `conn`, `planned_once` and
        # `reading_for_values`).
        def kept(limit: int, settings: Mapping[str, str]) -> OwnConnections:
            return OwnConnections(
                self.dsn,
                limit=limit,
                settings={**self._session, **settings},
                statement_cache_size=statement_cache_size,
                connect_timeout_s=self.connect_timeout_s,
            )

        self.general = kept(_OWN_MAX, {})
        self.generic = kept(_PLANNED_ONCE_MAX if cached else 0, PLANNED_ONCE_SETTINGS)
        self.for_values = kept(_FOR_VALUES_MAX if cached else 0, _FOR_VALUES_SETTINGS)
        self.closed = False
        # The event loop these connections belong to: a call from another is refused.
        self.owner = LoopOwner(url)
        # Told when a connection could not even be opened (the server was unreachable, not one
        # connection broken); a claim reads it to spare the leases that outage let run out.
        self.grace = LeaseGrace()

    async def _get_pool(self) -> asyncpg.Pool[asyncpg.Record]:
        if self.pool is not None:
            return self.pool
        async with self._pool_lock:
            if self.closed:
                raise DriverClosedError("postgres")
            if self.pool is None:
                self.pool = await asyncpg.create_pool(
                    self.dsn,
                    min_size=self._pool_min,
                    max_size=self.pool_max,
                    statement_cache_size=self._statement_cache_size,
                    timeout=self.connect_timeout_s,
                    server_settings=dict(self._session),
                    reset=_keep_session,
                )
            return self.pool

    @asynccontextmanager
    async def guard(self) -> AsyncIterator[None]:
        """Convert asyncpg/OS failures raised inside into `DriverUnavailableError`."""
        try:
            yield
        except DRIVER_FAILURES as exc:
            raise unavailable(exc, self.url, self.schema) from exc

    def damaged(self, exc: UndecodableRow) -> StoreDamagedError:
        """The error for a row of this database that cannot be read (faults.damaged)."""
        return damaged(exc, self.url, self.schema)

    def conn(self) -> _Borrowed:
        """A connection for one operation (`async with db.conn() as conn`); failures inside
        come out as `DriverUnavailableError`. One of the driver's own connections when one is
        free (or may be opened), else one from the pool."""
        return _Borrowed(self, (self.general,))

    def planned_once(self) -> _Borrowed:
        """A connection for a statement planned once (the claim, the stats): one of that set's
        (generic plans) when one is free or may be opened, else as `conn`. Plans never change
        results: any connection is correct."""
        return _Borrowed(self, (self.generic, self.general))

    def reading_for_values(self) -> _Borrowed:
        """A connection for a read planned for its values: one of that set's (custom plans)
        when one is free or may be opened, else as `conn` (see `fetch_for_values`)."""
        return _Borrowed(self, (self.for_values, self.general))

    async def idempotent(
        self, op: Callable[[Conn], Awaitable[T]], *, borrow: Callable[[], _Borrowed] | None = None
    ) -> T:
        """Run `op` on a connection (`borrow`'s, else `conn`'s); through a broken connection or
        an unreachable server, run it again on a fresh one (retry.py). Only for operations whose
        second run changes nothing the first did not (reads, upserts of the same values, fenced
        writes)."""
        take = borrow or self.conn

        async def once(first: bool) -> T:
            async with take() as conn:
                return await op(conn)

        return await self.retry.retrying(once)

    async def atomic(self, op: Callable[[Conn], Awaitable[T]]) -> T:
        """Run `op` (one statement, or one transaction it opens) on a connection; when the
        server rolled it back (a deadlock, a lock timeout), run it again whole on a fresh
        borrow (retry.py). Not through a broken connection, which may have committed it: for
        operations whose second run would act twice (a cancel, a prune, an audit event).
        `op` reads what it decides by inside its transaction, so a rerun decides afresh."""

        async def once() -> T:
            async with self.conn() as conn:
                return await op(conn)

        return await self.retry.rolled_back_again(once)

    async def fetch_for_values(self, query: str, *args: object) -> list[asyncpg.Record]:
        """The rows of a read planned for these values (a custom plan), as `idempotent` runs
        it: on a connection that plans each statement so, or without a statement cache (each
        statement is then prepared anew); else with the statement prepared anew here."""

        async def read(conn: Conn) -> list[asyncpg.Record]:
            if self._statement_cache_size == 0 or conn in self.for_values.all:
                return await conn.fetch(query, *args)
            return await (await conn.prepare(query)).fetch(*args)

        return await self.idempotent(read, borrow=self.reading_for_values)

    async def migrate(self, now_ms: int, install_from: InstallFrom = "schema") -> list[int]:
        # One transaction that reads the version under its lock: a rerun applies what is left.
        async def once(conn: Conn) -> list[int]:
            try:
                return await run_migrations(conn, self.schema, now_ms, install_from=install_from)
            except (SchemaTaken, asyncpg.PostgresError) as exc:
                # A schema that is another program's, or a role that may not alter it, is
                # refused for good: retrying as the same role on the same schema cannot help.
                refused = await refusal(conn, self.url, self.schema, exc)
                if refused is None:
                    raise
                raise refused from exc

        return await self.atomic(once)

    # --- own connections ----------------------------------------------------------------------

    def _release_own(
        self, kept: OwnConnections, conn: Connection, exc: BaseException | None
    ) -> None:
        """Give `conn` back to `kept` after an operation that raised `exc` (None: it did not);
        a driver failure, from either, comes out as `DriverUnavailableError`."""
        try:
            kept.give_back(conn, clean=_clean(exc))
        except DRIVER_FAILURES as failure:
            raise unavailable(failure, self.url, self.schema) from failure
        if isinstance(exc, DRIVER_FAILURES):
            raise unavailable(exc, self.url, self.schema) from exc

    # --- lifecycle ----------------------------------------------------------------------------

    async def close(self) -> None:
        # Another loop's close would hang on, or break, connections it cannot drive.
        self.owner.check()
        self.closed = True
        self.retry.close()
        for kept in (self.general, self.generic, self.for_values):
            every, free = kept.detach()
            for conn in every:
                if conn in free:
                    await self._close_or_terminate(conn)
                else:
                    conn.terminate()  # mid-operation in another task: that task sees it closed
        pool, self.pool = self.pool, None
        if pool is not None:
            await self._close_or_terminate(pool)

    async def _close_or_terminate(
        self, closing: asyncpg.Pool[asyncpg.Record] | asyncpg.Connection[asyncpg.Record]
    ) -> None:
        """A graceful close, bounded and shielded from the caller's cancellation; a hard
        terminate when the server does not answer in time or the close fails."""
        with anyio.move_on_after(self.connect_timeout_s, shield=True) as scope:
            try:
                await closing.close()
            except DRIVER_FAILURES:
                closing.terminate()
        if scope.cancelled_caught:
            closing.terminate()


class _Borrowed:
    """One operation's hold on a connection: see `Connections.conn`. A class, not a
    generator-based context manager: every statement the driver runs goes through one."""

    __slots__ = ("_db", "_from", "_kept", "_own", "_pooled")

    def __init__(self, db: Connections, kept: tuple[OwnConnections, ...]) -> None:
        self._db = db
        # The own sets to try, in order, before the pool; and the one `_own` came from.
        self._kept = kept
        self._from: OwnConnections | None = None
        self._own: Connection | None = None
        self._pooled: PoolAcquireContext[asyncpg.Record] | None = None

    async def __aenter__(self) -> Conn:
        db = self._db
        db.owner.check()
        try:
            # Each set in order: a free connection of it, else a new one when it has room.
            for kept in self._kept:
                own = kept.take_free() or await kept.open()
                if own is not None:
                    self._from, self._own = kept, own
                    return own
            self._pooled = (await db._get_pool()).acquire()
            return await self._pooled.__aenter__()
        except DRIVER_FAILURES as exc:
            if is_connection_failure(exc):
                db.grace.outage()
            raise unavailable(exc, db.url, db.schema) from exc

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        db = self._db
        if self._own is not None and self._from is not None:
            db._release_own(self._from, self._own, exc)
            return
        try:
            if self._pooled is not None:
                if _broken(exc) and self._pooled.connection is not None:
                    # The pool's release does not test a connection: close it, so the pool
                    # opens a fresh one instead of handing this one out mid-protocol.
                    self._pooled.connection.terminate()
                await self._pooled.__aexit__(exc_type, exc, tb)
        except DRIVER_FAILURES as failure:
            raise unavailable(failure, db.url, db.schema) from failure
        if isinstance(exc, DRIVER_FAILURES):
            raise unavailable(exc, db.url, db.schema) from exc


def _broken(exc: BaseException | None) -> bool:
    return exc is not None and is_connection_failure(exc)


def _clean(exc: BaseException | None) -> bool:
    """Whether a connection whose operation ended with `exc` may be used again: not after a
    cancellation (it may have landed mid-statement) nor once it broke."""
    return exc is None or (isinstance(exc, Exception) and not is_connection_failure(exc))
