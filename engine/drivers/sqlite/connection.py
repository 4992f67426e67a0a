"""One SQLite connection, used off the event loop, with concurrent operations group-committed.

Every driver call becomes an `Op`: a plain function of the connection. Calls that arrive while
the connection is busy queue up, and the next thread hop runs all of them in ONE transaction (a
savepoint each, so one op's error undoes only that op). Sixteen workers acking at once cost one
hop and one commit, not sixteen; each caller still returns only after its own write committed.

Writes run under `BEGIN IMMEDIATE`, so a transaction never has to upgrade a read lock (in WAL
that fails at once with SQLITE_BUSY, ignoring the busy timeout). A batch that meets SQLITE_BUSY
anyway is rolled back and run again; no "database is locked" reaches a caller. Every other
sqlite3 failure (and a value sqlite3 cannot bind) becomes a typed error by `errors.convert`,
chained with `from`.
"""

from __future__ import annotations

import contextlib
import os
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import anyio
import anyio.lowlevel
import anyio.to_thread

from engine.driver_errors import DriverClosedError, DriverUnavailableError
from engine.drivers.damage import UndecodableRow
from engine.drivers.lease_grace import LeaseGrace
from engine.drivers.sqlite.checkpoints import BACKSTOP_FRAMES, Checkpointer
from engine.drivers.sqlite.errors import (
    UNBINDABLE,
    PathRefused,
    SqliteTooOldError,
    SqliteWriteLockHeldError,
    check_path,
    convert,
    is_busy,
)
from engine.drivers.sqlite.library import new_enough, sqlite3
from engine.drivers.sqlite.lock_holder import another_process_holds
from engine.errors import InvalidArgumentError, JobsError
from engine.extras import upgrade_line

T = TypeVar("T")
Item = TypeVar("Item")

# Rounds of `busy_timeout` a batch may wait through before the caller gets a typed error.
_BUSY_ROUNDS = 6
_SYNCHRONOUS = ("OFF", "NORMAL", "FULL", "EXTRA")
# Connections a forked child inherited from its parent: held so they are never closed here.
_INHERITED: list[sqlite3.Connection] = []


def typed(path: str, exc: BaseException) -> JobsError:
    """`convert(path, exc)` with `exc` chained as its cause."""
    error = convert(path, exc)
    error.__cause__ = exc
    return error


@dataclass(eq=False)
class Op(Generic[T]):
    """One unit of work for the connection thread and, once run, its outcome."""

    fn: Callable[[sqlite3.Connection], T]
    write: bool
    finished: bool = False
    value: Any = None
    error: BaseException | None = None

    def outcome(self) -> T:
        if self.error is not None:
            raise self.error
        result: T = self.value
        return result


class Executor:
    """Owns the connection; `run(fn)` executes `fn(conn)` in a worker thread, batched."""

    def __init__(
        self,
        path: str,
        *,
        busy_timeout_ms: int = 5_000,
        synchronous: str = "NORMAL",
    ) -> None:
        if isinstance(busy_timeout_ms, bool) or not isinstance(busy_timeout_ms, int):
            raise InvalidArgumentError("busy_timeout_ms", busy_timeout_ms, "a whole number ≥ 0")
        if busy_timeout_ms < 0:
            raise InvalidArgumentError("busy_timeout_ms", busy_timeout_ms, "a whole number ≥ 0")
        word = synchronous.upper() if isinstance(synchronous, str) else ""
        if word not in _SYNCHRONOUS:
            expected = f"one of {', '.join(_SYNCHRONOUS)}"
            raise InvalidArgumentError("synchronous", synchronous, expected)
        if not new_enough(sqlite3):
            raise SqliteTooOldError(sqlite3.sqlite_version)
        self.path = path
        self.busy_timeout_ms = busy_timeout_ms
        self.synchronous = word
        self._conn: sqlite3.Connection | None = None
        self._conn_pid = 0
        # WAL checkpoints off the committing thread; None until the connection is in WAL mode.
        self._checkpoints: Checkpointer | None = None
        # The busy timeout the open connection has now (-1: none set yet).
        self._busy_timeout_set = -1
        self._pending: list[Op[Any]] = []
        self._flushing = False
        self._batch_done: anyio.Event | None = None
        self._closed = False
        # Our own token, not anyio's shared pool: job code running sync steps in threads must
        # never be able to starve the connection its steps are saved through. Made lazily, like
        # the event: both need a running event loop, and a driver may be built outside one.
        self._limiter: anyio.CapacityLimiter | None = None
        # Told when a write was kept from the file's lock for a whole busy timeout (or every
        # round): this process's lease holders were kept out too, and a claim reads it to spare
        # the leases that ran out meanwhile.
        self.grace = LeaseGrace()

    # --- the async side: queue, flush, hand results back ----------------------------------------

    async def run(
        self, fn: Callable[[sqlite3.Connection], T], *, write: bool = True, inline: bool = False
    ) -> T:
        """`inline=True`: a short op (a lone enqueue, a version poll) that finds itself alone
        runs on the calling thread, sparing the hop to a thread (most of its cost)."""
        if self._closed:
            raise DriverClosedError("sqlite")
        op: Op[T] = Op(fn, write)
        self._pending.append(op)
        try:
            if inline:
                # One turn of the loop first: concurrent callers queue theirs, and then the
                # batch (one hop, one commit for all) is the cheaper way, so it is taken.
                await anyio.lowlevel.checkpoint()
                if self._pending == [op] and not self._flushing:
                    self._pending.clear()
                    if not self._run_inline(op):
                        self._pending.append(op)  # busy: the thread waits the lock out
            while not op.finished:
                if self._flushing:
                    await self._done_event().wait()
                else:
                    await self._flush()
                    if not op.finished and op not in self._pending:
                        # Cannot happen while _flush keeps its contract; spinning would hang.
                        raise DriverUnavailableError(
                            "sqlite", "an operation was lost", upgrade_line()
                        )
        except BaseException:
            # Cancelled before a thread took it: it must not run later on nobody's behalf.
            if not op.finished and op in self._pending:
                self._pending.remove(op)
            raise
        return op.outcome()

    def _done_event(self) -> anyio.Event:
        if self._batch_done is None:
            self._batch_done = anyio.Event()
        return self._batch_done

    def _announce(self) -> None:
        event, self._batch_done = self._batch_done, None
        if event is not None:
            event.set()

    async def _flush(self) -> None:
        """Run queued ops in batches until none are left. One flusher at a time, so the
        connection is only ever used by one thread at once."""
        self._flushing = True
        try:
            if self._limiter is None:
                self._limiter = anyio.CapacityLimiter(1)
            while self._pending:
                batch, self._pending = self._pending, []
                try:
                    # Not abandoned on cancel: once the thread has the batch it finishes it, so
                    # every op in it has an outcome before this task lets a cancellation through.
                    await anyio.to_thread.run_sync(self._run_batch, batch, limiter=self._limiter)
                finally:
                    # Cancelled before a thread took the batch: its ops go back to the front.
                    unfinished = [op for op in batch if not op.finished]
                    if unfinished:
                        self._pending[:0] = unfinished
                    self._announce()
        finally:
            self._flushing = False
            self._announce()

    async def close(self) -> None:
        self._closed = True
        while self._flushing or self._pending:
            if self._flushing:
                await self._done_event().wait()
            else:
                await self._flush()
        conn, self._conn = self._conn, None
        checkpoints, self._checkpoints = self._checkpoints, None
        if conn is not None and self._conn_pid == os.getpid():
            if checkpoints is not None:
                await anyio.to_thread.run_sync(checkpoints.close)
            await anyio.to_thread.run_sync(conn.close)
        elif conn is not None:
            _INHERITED.append(conn)
            self._abandon(checkpoints)

    # --- the thread side ------------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        if self._conn is not None:
            if self._conn_pid == os.getpid():
                return self._conn
            # Inherited across fork(): SQLite forbids using it here, and closing it could
            # checkpoint or unlink the parent's WAL. Keep it referenced, never touched, and open
            # this process's own connection.
            _INHERITED.append(self._conn)
            self._conn = None
            self._abandon(self._checkpoints)
            self._checkpoints = None
        # Before SQLite opens it: given /dev/null, SQLite wrote /dev/null-journal.
        check_path(self.path)
        directory = os.path.dirname(os.path.abspath(self.path))
        os.makedirs(directory, exist_ok=True)
        # isolation_level=None: this module issues BEGIN/COMMIT itself. check_same_thread=False
        # is safe because only the single flusher's thread touches the connection at a time.
        conn = sqlite3.connect(
            self.path,
            timeout=self.busy_timeout_ms / 1000,
            isolation_level=None,
            check_same_thread=False,
        )
        try:
            for attempt in range(_BUSY_ROUNDS):
                try:
                    # Switching to WAL needs a brief exclusive lock another process may hold.
                    (mode,) = conn.execute("PRAGMA journal_mode = WAL").fetchone()
                    break
                except sqlite3.OperationalError as exc:
                    if not is_busy(exc) or attempt == _BUSY_ROUNDS - 1:
                        raise
                    _backoff(attempt)
            self._busy_timeout_set = -1
            self._wait_for_locks(conn, int(self.busy_timeout_ms))
            # A PRAGMA takes no parameters; the word was checked against _SYNCHRONOUS.
            conn.execute(f"PRAGMA synchronous = {self.synchronous}")
            conn.execute("PRAGMA foreign_keys = ON")
            if mode == "wal":
                conn.execute(f"PRAGMA wal_autocheckpoint = {BACKSTOP_FRAMES}")
        except BaseException:
            conn.close()
            raise
        if mode == "wal" and self._checkpoints is None:
            self._checkpoints = Checkpointer(self.path)
        self._conn, self._conn_pid = conn, os.getpid()
        return conn

    @staticmethod
    def _abandon(checkpoints: Checkpointer | None) -> None:
        """A forked child's share of the parent's checkpointer: its connection is kept, unused."""
        inherited = None if checkpoints is None else checkpoints.abandon()
        if inherited is not None:
            _INHERITED.append(inherited)

    def _run_batch(self, batch: list[Op[Any]]) -> None:
        try:
            conn = self._connect()
        # OSError: the directory could not be made; PathRefused: no file could be the database.
        except (sqlite3.Error, OSError, PathRefused) as exc:
            if isinstance(exc, sqlite3.Error) and is_busy(exc):
                self.grace.outage()  # locked through every round of the switch to WAL
            self._fail_all(batch, exc)
            return
        write = any(op.write for op in batch)
        self._wait_for_locks(conn, int(self.busy_timeout_ms))
        for attempt in range(_BUSY_ROUNDS):
            started = time.monotonic()
            try:
                self._attempt(conn, batch, write)
                return
            except sqlite3.Error as exc:
                _rollback(conn)
                busy = is_busy(exc)
                waited = time.monotonic() - started >= self.busy_timeout_ms / 1000
                last = attempt == _BUSY_ROUNDS - 1
                if busy and write and (waited or last):
                    # Kept from the lock a whole busy timeout (with none, through every round):
                    # so were this process's lease holders; its claims spare their leases.
                    if self.busy_timeout_ms > 0 or last:
                        self.grace.outage()
                    if self._held_here():
                        self._last_try(conn, batch, exc)
                        return
                if busy and not last:
                    _backoff(attempt)
                    continue
                self._fail_all(batch, exc)
                return
            except Exception as exc:
                # Not the database's doing (a bug): every op in the batch reports it.
                _rollback(conn)
                for op in batch:
                    op.value, op.error, op.finished = None, exc, True
                return

    def _run_inline(self, op: Op[Any]) -> bool:
        """Run `op` now on the event loop's thread, as a batch of one; False (nothing done) when
        the connection is not open yet or the database is locked.

        Safe because the connection is used by one thread at a time: no flusher is running
        (checked by the caller, and a flusher clears `_flushing` only after its thread returned
        the connection), and this runs to the end without awaiting, so no flush can start
        meanwhile. The busy timeout is 0 on the loop (the thread sets its own back before its next
        batch): a lock another process holds fails at once, and the op goes to the thread, which
        may wait, instead of stalling the loop."""
        conn = self._conn
        if conn is None or self._conn_pid != os.getpid():
            return False  # opening (and a fork's reopen) stays on the thread side
        self._wait_for_locks(conn, 0)
        try:
            self._attempt(conn, [op], op.write)
        except sqlite3.Error as exc:
            _rollback(conn)
            if is_busy(exc):
                op.finished, op.value, op.error = False, None, None
                return False
            self._fail_all([op], exc)
        except Exception as exc:
            _rollback(conn)  # a bug, reported as _run_batch does
            op.value, op.error, op.finished = None, exc, True
        return True

    def _wait_for_locks(self, conn: sqlite3.Connection, ms: int) -> None:
        """Set the busy timeout for what runs next, skipping the PRAGMA when it is already so:
        the loop's inline ops wait for nothing, the thread's wait up to `busy_timeout_ms`."""
        if self._busy_timeout_set != ms:
            conn.execute(f"PRAGMA busy_timeout = {ms}")
            self._busy_timeout_set = ms

    def _held_here(self) -> bool:
        """Whether the write lock SQLite waited on is held in this process: no other process
        holds it. Then the rounds left would wait on a holder that, most often, waits on this
        very call (the application's transaction around its enqueue); a lock held elsewhere
        (another worker) is waited out as before."""
        return another_process_holds(self.path) is False

    def _last_try(
        self, conn: sqlite3.Connection, batch: list[Op[Any]], busy: BaseException
    ) -> None:
        """Once more at once, then SQLITE_WRITE_LOCK_HELD: a holder in another process that let
        go between SQLite's answer and the look at the lock is not refused for good."""
        self._wait_for_locks(conn, 0)
        try:
            self._attempt(conn, batch, True)
        except sqlite3.Error as exc:
            _rollback(conn)
            if is_busy(exc):
                self._refuse_all(batch, busy)
            else:
                self._fail_all(batch, exc)
        except Exception as exc:
            _rollback(conn)  # a bug, reported as _run_batch does
            for op in batch:
                op.value, op.error, op.finished = None, exc, True

    def _refuse_all(self, batch: list[Op[Any]], cause: BaseException) -> None:
        for op in batch:
            error = SqliteWriteLockHeldError(self.path, self.busy_timeout_ms)
            error.__cause__ = cause
            op.value, op.error, op.finished = None, error, True

    def _fail_all(self, batch: list[Op[Any]], cause: BaseException) -> None:
        # One error object per op: each caller raises its own, with its own traceback.
        for op in batch:
            op.value, op.error, op.finished = None, typed(self.path, cause), True

    def _attempt(self, conn: sqlite3.Connection, batch: list[Op[Any]], write: bool) -> None:
        """One try at the whole batch in one transaction. A busy error propagates (the caller
        rolls back and retries every op); any other error settles only the op that raised it."""
        # A batch of reads still takes a (deferred) transaction: one snapshot for all of it.
        conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
        # A lone op needs no savepoint: undoing it is undoing the transaction.
        alone = len(batch) == 1
        for op in batch:
            op.finished, op.value, op.error = False, None, None
            # Only a write can leave something to undo; a read needs no savepoint.
            marked = op.write and not alone
            if marked:
                conn.execute("SAVEPOINT op")
            try:
                op.value = op.fn(conn)
            except Exception as exc:
                if not conn.in_transaction:
                    # SQLite rolled the whole transaction back (a full disk, an I/O error): the
                    # ops before this one are undone too, so the whole batch fails with `exc`.
                    raise
                # A refusal (duplicate, slot lost, a value SQLite refused …) undoes only this op.
                if marked:
                    conn.execute("ROLLBACK TO op")
                    conn.execute("RELEASE op")
                elif op.write:
                    conn.execute("ROLLBACK")
                if isinstance(exc, sqlite3.Error) and is_busy(exc):
                    raise
                if isinstance(exc, (sqlite3.Error, UndecodableRow, *UNBINDABLE)):
                    op.error = typed(self.path, exc)
                else:
                    op.error = exc
            else:
                if marked:
                    conn.execute("RELEASE op")
        if conn.in_transaction:  # not when a lone write was refused and rolled back
            conn.execute("COMMIT")
            if write and self._checkpoints is not None:
                self._checkpoints.committed(conn.total_changes)
        for op in batch:
            op.finished = True


def each_item(
    conn: sqlite3.Connection, path: str, items: Sequence[Item], write: Callable[[Item], object]
) -> list[JobsError | None]:
    """Run `write(item)` for each item inside the current op, each under its own savepoint, as
    `Executor._attempt` runs ops: a refusal undoes and fails only its item; a busy database, a
    lost transaction or a bug fails the whole op."""
    outcomes: list[JobsError | None] = []
    for item in items:
        conn.execute("SAVEPOINT item")
        try:
            write(item)
        except (JobsError, sqlite3.Error, *UNBINDABLE) as exc:
            if not conn.in_transaction or (isinstance(exc, sqlite3.Error) and is_busy(exc)):
                raise
            conn.execute("ROLLBACK TO item")
            conn.execute("RELEASE item")
            outcomes.append(exc if isinstance(exc, JobsError) else typed(path, exc))
        else:
            conn.execute("RELEASE item")
            outcomes.append(None)
    return outcomes


def _rollback(conn: sqlite3.Connection) -> None:
    if conn.in_transaction:
        # An error here means the transaction is already gone: nothing is left to undo.
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")


def _backoff(attempt: int) -> None:
    # Real time on purpose: this is the connection thread waiting out another process's lock,
    # not engine time. Jittered so two processes do not retry in lockstep.
    time.sleep(min(0.2, 0.005 * (2**attempt)) * (0.5 + random.random()))
