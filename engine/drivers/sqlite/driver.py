"""The SQLite driver: the whole Protocol on one file, with no server to run.

Each method reads the injected clock on the event loop, then hands a plain function of the
connection to the executor, which runs it off the loop, batched with whatever else is waiting,
in one transaction. The semantics are the memory driver's; `lifecycle` and `ledgers` hold them.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterable, Sequence
from typing import Any

import anyio

from engine import rules
from engine.changes import ChangeFeed
from engine.clock import SYSTEM_CLOCK, Clock
from engine.drivers.app_connections import raw_connection_fix, sqlalchemy_kind
from engine.drivers.base import AckWrite, RunPosition, StepWrite, StoreReport
from engine.drivers.closing import closable
from engine.drivers.schema_versions import Migrated, version_words
from engine.drivers.sqlite import descriptors as descriptors_sql
from engine.drivers.sqlite import inbound_events as events_sql
from engine.drivers.sqlite import ledgers, lifecycle, migrate, retention
from engine.drivers.sqlite import pauses as pauses_sql
from engine.drivers.sqlite import progress as progress_sql
from engine.drivers.sqlite import queries as q
from engine.drivers.sqlite import rate_limits as rates_sql
from engine.drivers.sqlite import report as report_sql
from engine.drivers.sqlite import reruns as reruns_sql
from engine.drivers.sqlite import settled_counts as settled_sql
from engine.drivers.sqlite.connection import Executor
from engine.drivers.sqlite.errors import (
    UNBINDABLE,
    OutboxNoSqliteTxError,
    OutboxNotSqliteError,
    OutboxOtherFileError,
    OutboxOtherSqliteError,
    OutboxSqlalchemyError,
    SqliteWriteLockHeldError,
    convert,
    is_busy,
)
from engine.drivers.sqlite.library import sqlite3
from engine.drivers.sqlite.lock_holder import another_process_holds
from engine.drivers.sqlite.wakeups import file_key, shared_feed, shared_waker
from engine.drivers.urls import migrate_fix
from engine.errors import InvalidArgumentError, JobsError
from engine.ids import new_ids
from engine.inbound_events import EventCursor, InboundEvent
from engine.rate_limits import RateReservation, RateState, RateTake, RateVerdict
from engine.retention import Cutoffs, PruneCount
from engine.wake import Waker
from schemas.backfill import BackfillRun
from schemas.descriptor import JobDescriptor
from schemas.events import EventRecord
from schemas.jobs import (
    ClaimedJob,
    ClaimExclusion,
    EnqueueRequest,
    EnqueueResult,
    HeartbeatResult,
    JobFilter,
    JobPage,
    JobRecord,
    NackOptions,
)
from schemas.outbox import OutboxRow, OutboxWaiting
from schemas.pauses import Pause, PauseKind
from schemas.progress import Progress
from schemas.scheduler import TaskFailure, TaskState
from schemas.states import BackfillStatus
from schemas.stats import QueueStats, SettledCount, WorkerInfo
from schemas.steps import StepRecord
from schemas.trace import TracePage, TraceQuery

# How often an idle wait looks for other processes' commits (the worker's own poll is apart).
COMMIT_POLL_MS = 50
# A wait that follows a claim which found work looks this often (the next job of a busy queue
# is picked up within a few ms), for as long as work keeps coming and BUSY_HOLD_S after; then
# each empty look doubles the gap back to `poll_ms`, so an idle worker costs what it did.
FAST_POLL_MS = 2
BUSY_HOLD_S = 1.0


def _other_sqlite(tx: Any) -> str | None:
    """The module of `tx` when it is a connection of another sqlite3 module than the driver's
    (Python's own while the driver runs on the fallback, or the other way round)."""
    module = type(tx).__module__
    if type(tx).__name__ == "Connection" and module in ("sqlite3", "pysqlite3.dbapi2"):
        return module
    return None


def _is_aiosqlite(tx: Any) -> bool:
    """Whether `tx` is an aiosqlite connection (or a subclass), known without importing it."""
    return any(
        cls.__name__ == "Connection" and cls.__module__.startswith("aiosqlite.")
        for cls in type(tx).__mro__
    )


# aiosqlite's form of OUTBOX_NO_TX's fix: its calls run on its thread and are awaited.
_AIOSQLITE_BEGIN = (
    'await conn.execute("BEGIN"); await jobs.stage(conn, name, input); await conn.commit()'
)


def _busy_timeout(tx: sqlite3.Connection) -> int | None:
    """The busy timeout of the application's connection `tx` in ms (None: unreadable now)."""
    try:
        (ms,) = tx.execute("PRAGMA busy_timeout").fetchone()
    except sqlite3.Error:
        return None
    return int(ms)


def _data_version(conn: sqlite3.Connection) -> int:
    version: int = conn.execute("PRAGMA data_version").fetchone()[0]
    return version


@closable
class SqliteDriver:
    """`SqliteDriver(path, clock=…, poll_ms=50, busy_timeout_ms=5000, synchronous="NORMAL")`.

    `poll_ms` is how often an idle wait looks for other processes' commits (real time; an
    enqueue in this process wakes it at once); within a second of a claim that found work it
    looks every FAST_POLL_MS. `synchronous="FULL"` also survives power loss
    (NORMAL, in WAL, survives any process crash) at the cost of an fsync per commit.
    """

    kind = "sqlite"

    def __init__(
        self,
        path: str,
        *,
        clock: Clock | None = None,
        poll_ms: int = COMMIT_POLL_MS,
        busy_timeout_ms: int = 5_000,
        synchronous: str = "NORMAL",
    ) -> None:
        if isinstance(poll_ms, bool) or not isinstance(poll_ms, int) or poll_ms < 1:
            raise InvalidArgumentError("poll_ms", poll_ms, "a whole number of milliseconds ≥ 1")
        # Resolved now: `sqlite:///rel.db` means relative to the working directory at connect
        # time, even if the process changes directory before the file is first opened.
        self.path = os.path.abspath(path)
        self.clock: Clock = clock or SYSTEM_CLOCK
        self.poll_ms = poll_ms
        self._exec = Executor(self.path, busy_timeout_ms=busy_timeout_ms, synchronous=synchronous)
        self._waker: Waker | None = None
        # PRAGMA data_version as of the last claim: a different value later means another
        # connection committed since, so there may be work the claim did not see.
        self._seen_version: int | None = None
        # The adaptive look's state: when a claim last found work (monotonic s), and the gap
        # the idle looks have grown to.
        self._worked_at = float("-inf")
        self._gap_ms = float(poll_ms)
        self._changes: ChangeFeed | None = None
        # PRAGMA data_version as of the last change wait: another process's commits since.
        self._change_version: int | None = None

    def _wake(self) -> Waker:
        if self._waker is None:  # made lazily: a Waker needs a running event loop
            self._waker = shared_waker(self.path)
        return self._waker

    def _changed(self) -> None:
        """A write a reader may follow went in (engine.changes): move this file's feed."""
        if self._changes is None:  # made lazily, as the waker
            self._changes = shared_feed(self.path)
        self._changes.notify()

    async def migrate(self) -> None:
        await self.migrate_versions()

    async def migrate_versions(self) -> Migrated:
        now = self.clock.now_ms()

        def op(conn: sqlite3.Connection) -> tuple[list[int], int]:
            return migrate.apply(conn, now), migrate.stored_version(conn)

        applied, version = await self._exec.run(op)
        latest = migrate.migrations()[-1].version
        words = version_words(version, latest, migrate_fix(f"sqlite:///{self.path}"))
        return Migrated(applied, f"schema: {words}")

    async def server_report(self) -> StoreReport:
        return await anyio.to_thread.run_sync(report_sql.report, self.path)

    async def close(self) -> None:
        await self._exec.close()
        self._wake().notify()

    # --- jobs ---------------------------------------------------------------------------------

    async def enqueue_parts(
        self, parts: Iterable[Sequence[EnqueueRequest]], *, now: int | None = None
    ) -> list[EnqueueResult]:
        # One thread writes SQLite under the GIL that builds the parts: nothing to overlap, so
        # they are built first and written in one transaction.
        return await self.enqueue([request for part in parts for request in part], now=now)

    async def enqueue(
        self, requests: Sequence[EnqueueRequest], *, now: int | None = None
    ) -> list[EnqueueResult]:
        at = self.clock.now_ms() if now is None else now
        batch = list(requests)
        # A lone request is a short write: it may skip the thread hop (Executor.run's inline).
        results, inserted = await self._exec.run(
            lambda c: lifecycle.enqueue(c, self.path, batch, at), inline=len(batch) == 1
        )
        if inserted:
            self._wake().notify()
            self._changed()
        return results

    async def claim(
        self,
        worker_id: str,
        limit: int,
        lease_ms: int,
        queues: Sequence[str] | None = None,
        excluding: ClaimExclusion | None = None,
    ) -> list[ClaimedJob]:
        now = self.clock.now_ms()
        wanted = None if queues is None else list(queues)
        grace = self._exec.grace

        def op(conn: sqlite3.Connection) -> tuple[list[ClaimedJob], bool, int]:
            # Read at each try, not before the wait: a try this very claim waited out the lock
            # for leaves the leases that ran out meanwhile to their holders (LeaseGrace).
            outage = grace.outage_seen
            take_over = grace.take_over(outage, now)
            claimed = lifecycle.claim(
                conn, worker_id, limit, lease_ms, wanted, now, self.path, excluding, take_over
            )
            return claimed, outage, _data_version(conn)

        claimed, outage, self._seen_version = await self._exec.run(op)
        # One lease from when it went through (`now` may be from before a long wait on the lock).
        grace.claimed(outage, self.clock.now_ms(), lease_ms)
        if claimed:
            self._worked_at = time.monotonic()
            self._changed()
        return claimed

    async def heartbeat(self, job_id: str, token: str, lease_ms: int) -> HeartbeatResult:
        now = self.clock.now_ms()
        return await self._exec.run(lambda c: lifecycle.heartbeat(c, job_id, token, lease_ms, now))

    async def ack_many(self, writes: Sequence[AckWrite]) -> list[JobsError | None]:
        now = self.clock.now_ms()
        batch = list(writes)
        outcomes = await self._exec.run(lambda c: lifecycle.ack_many(c, self.path, batch, now))
        if any(outcome is None for outcome in outcomes):
            self._changed()
        return outcomes

    async def nack(self, job_id: str, token: str, options: NackOptions) -> JobRecord:
        now = self.clock.now_ms()
        record = await self._exec.run(lambda c: lifecycle.nack(c, job_id, token, options, now))
        if record.state in rules.WAITING_STATES:
            self._wake().notify()
        self._changed()
        return record

    async def get(self, job_id: str, tenant_id: str | None = None) -> JobRecord:
        return await self._exec.run(lambda c: lifecycle.get(c, job_id, tenant_id), write=False)

    async def list_jobs(self, filter: JobFilter) -> JobPage:
        return await self._exec.run(
            lambda c: lifecycle.list_jobs(c, filter, self.path), write=False
        )

    async def load_trace(
        self, job_id: str, tenant_id: str | None = None, page: TraceQuery | None = None
    ) -> TracePage:
        wanted = page or TraceQuery()
        return await self._exec.run(
            lambda c: lifecycle.load_trace(c, job_id, tenant_id, wanted), write=False
        )

    async def stats(
        self, queues: Sequence[str] | None = None, *, tenant_id: str | None = None
    ) -> list[QueueStats]:
        now = self.clock.now_ms()
        wanted = None if queues is None else list(queues)
        return await self._exec.run(
            lambda c: lifecycle.stats(c, wanted, tenant_id, now), write=False
        )

    async def cancel(self, job_id: str, tenant_id: str | None, actor: str | None) -> JobRecord:
        now = self.clock.now_ms()
        record = await self._exec.run(lambda c: lifecycle.cancel(c, job_id, tenant_id, actor, now))
        self._changed()
        return record

    async def retry(
        self, job_id: str, tenant_id: str | None, include_cancelled: bool, actor: str | None
    ) -> JobRecord:
        now = self.clock.now_ms()
        record = await self._exec.run(
            lambda c: lifecycle.retry(c, job_id, tenant_id, include_cancelled, actor, now)
        )
        self._wake().notify()
        self._changed()
        return record

    async def record_event(self, event: EventRecord) -> None:
        await self._exec.run(lambda c: lifecycle.record_event(c, event))

    # --- steps --------------------------------------------------------------------------------

    async def load_steps(self, run_id: str) -> list[StepRecord]:
        return await self._exec.run(lambda c: lifecycle.load_steps(c, run_id), write=False)

    async def save_steps_many(self, writes: Sequence[StepWrite]) -> list[JobsError | None]:
        batch = list(writes)
        outcomes = await self._exec.run(lambda c: ledgers.save_steps_many(c, self.path, batch))
        if any(outcome is None for outcome in outcomes):
            self._changed()
        return outcomes

    # --- limiter slots ------------------------------------------------------------------------

    async def acquire_slots(
        self, job_id: str, caps: Sequence[tuple[str, int]], expires_at: int
    ) -> str | None:
        now = self.clock.now_ms()
        wanted = list(caps)
        return await self._exec.run(
            lambda c: ledgers.acquire_slots(c, job_id, wanted, expires_at, now)
        )

    async def release_slots(self, job_id: str) -> None:
        await self._exec.run(lambda c: ledgers.release_slots(c, job_id))

    # --- workers ------------------------------------------------------------------------------

    async def worker_seen(self, info: WorkerInfo) -> None:
        now = self.clock.now_ms()
        await self._exec.run(lambda c: ledgers.worker_seen(c, info, now))

    async def worker_gone(self, worker_id: str) -> None:
        await self._exec.run(lambda c: ledgers.worker_gone(c, worker_id))

    async def live_workers(self, seen_since: int) -> list[WorkerInfo]:
        return await self._exec.run(lambda c: ledgers.live_workers(c, seen_since), write=False)

    # --- wake-ups -----------------------------------------------------------------------------

    async def wait_for_work(self, timeout_ms: int) -> None:
        """An enqueue in this process (any driver on this file) wakes it at once; another
        process's commit within `poll_ms`; otherwise `timeout_ms` of CLOCK time ends it."""
        waker = self._wake()
        async with anyio.create_task_group() as tg:

            async def watch() -> None:
                await self._other_connection_committed()
                tg.cancel_scope.cancel()

            tg.start_soon(watch)
            await waker.wait(self.clock, timeout_ms)
            tg.cancel_scope.cancel()

    async def _other_connection_committed(self) -> None:
        """Return once another connection has committed since the last claim. Polls on real
        time: other processes' writes happen in real time whatever clock the engine reads."""
        try:
            baseline = self._seen_version
            if baseline is None:
                baseline = await self._exec.run(_data_version, write=False, inline=True)
            while True:
                await anyio.sleep(self._next_gap_ms() / 1000)
                if await self._exec.run(_data_version, write=False, inline=True) != baseline:
                    return
        except JobsError:
            return  # closed or unreachable: let the caller's next call report it

    def _next_gap_ms(self) -> float:
        """Fast while work came recently (see FAST_POLL_MS), else double up to `poll_ms`."""
        fast = min(FAST_POLL_MS, self.poll_ms)
        if time.monotonic() - self._worked_at < BUSY_HOLD_S:
            self._gap_ms = fast
        else:
            self._gap_ms = min(float(self.poll_ms), max(fast, self._gap_ms * 2))
        return self._gap_ms

    async def wait_for_change(self, seen: int, timeout_ms: int) -> int:
        """A write through any driver on this file in this process moves the feed at once;
        another process's commit is seen within `poll_ms` (PRAGMA data_version, as above)."""
        if self._changes is None:
            self._changes = shared_feed(self.path)
        feed = self._changes
        async with anyio.create_task_group() as tg:

            async def watch() -> None:
                await self._committed_since_last_change_wait()
                feed.notify()
                tg.cancel_scope.cancel()

            tg.start_soon(watch)
            await feed.wait(seen, self.clock, timeout_ms)
            tg.cancel_scope.cancel()
        return feed.count

    async def _committed_since_last_change_wait(self) -> None:
        """Return once another connection has committed since the last change wait; never
        when the file cannot be read (the caller's timeout ends the wait)."""
        try:
            current = await self._exec.run(_data_version, write=False, inline=True)
            if self._change_version is None:
                self._change_version = current
            while current == self._change_version:
                await anyio.sleep(self.poll_ms / 1000)  # real time: see _other_connection_committed
                current = await self._exec.run(_data_version, write=False, inline=True)
            self._change_version = current
        except JobsError:
            await anyio.sleep_forever()

    # --- backfill ledger ----------------------------------------------------------------------

    async def backfill_save(self, run: BackfillRun) -> None:
        await self._exec.run(lambda c: ledgers.backfill_save(c, run))
        self._changed()

    async def backfill_runs(
        self,
        name: str | None = None,
        environment: str | None = None,
        *,
        status: BackfillStatus | None = None,
        before: RunPosition | None = None,
        limit: int | None = None,
    ) -> list[BackfillRun]:
        return await self._exec.run(
            lambda c: ledgers.backfill_runs(c, name, environment, status, before, limit),
            write=False,
        )

    # --- scheduler ----------------------------------------------------------------------------

    async def task_state(self, task: str) -> TaskState | None:
        return await self._exec.run(lambda c: ledgers.task_state(c, task), write=False)

    async def task_claim(self, task: str, expected: int | None, occurrence_ms: int) -> bool:
        now = self.clock.now_ms()
        return await self._exec.run(
            lambda c: ledgers.task_claim(c, task, expected, occurrence_ms, now)
        )

    async def task_fire(
        self,
        task: str,
        expected: int | None,
        occurrences: Sequence[int],
        requests: Sequence[EnqueueRequest],
    ) -> list[EnqueueResult] | None:
        now = self.clock.now_ms()
        batch = list(requests)
        results, inserted = await self._exec.run(
            lambda c: ledgers.task_fire(c, self.path, task, expected, occurrences[-1], batch, now)
        )
        if inserted:
            self._wake().notify()
            self._changed()
        return results

    async def task_unfinished(self, task: str) -> list[int]:
        return []  # task_fire claims and enqueues in one transaction

    async def task_finished(self, task: str, occurrences: Sequence[int]) -> None:
        return None

    async def task_failure(self, task: str, failure: TaskFailure) -> None:
        now = self.clock.now_ms()
        await self._exec.run(lambda c: ledgers.task_failure(c, task, failure, now))

    # --- outbox -------------------------------------------------------------------------------

    async def outbox_stage(self, tx: Any, requests: Sequence[EnqueueRequest]) -> list[str]:
        """Insert through the application's own connection `tx`, inside ITS open transaction:
        the jobs exist exactly when that transaction commits. Runs on the calling thread,
        because a sqlite3 connection belongs to the thread that made it (an aiosqlite
        connection's statements run on its own thread, awaited)."""
        if not isinstance(tx, sqlite3.Connection):
            if _is_aiosqlite(tx):
                return await self._stage_aiosqlite(tx, requests)
            other = _other_sqlite(tx)
            if other is not None:
                raise OutboxOtherSqliteError(other, sqlite3.__name__, self.path)
            kind = sqlalchemy_kind(tx)
            if kind is not None:
                raise OutboxSqlalchemyError(tx, kind, raw_connection_fix(kind), self.path)
            raise OutboxNotSqliteError(tx, self.path)
        if not tx.in_transaction:
            raise OutboxNoSqliteTxError
        now = self.clock.now_ms()
        ids: list[str] = []
        try:
            self._same_file(tx.execute("PRAGMA database_list").fetchall())
            for request, row_id in zip(requests, new_ids(len(requests), now), strict=True):
                tx.execute(q.STAGE, {"id": row_id, "staged_at": now, "request": request.to_json()})
                ids.append(row_id)
        except (sqlite3.Error, *UNBINDABLE) as exc:
            raise self._stage_failed(exc, _busy_timeout(tx) if is_busy(exc) else None) from exc
        return ids

    def _stage_failed(self, exc: BaseException, waited_ms: int | None) -> JobsError:
        """The error of a stage SQLite refused: SQLITE_WRITE_LOCK_HELD when the application's
        connection waited out its busy timeout (`waited_ms`) on a write lock that no other
        process holds, so another connection of this one does."""
        if waited_ms is not None and another_process_holds(self.path) is False:
            return SqliteWriteLockHeldError(self.path, waited_ms, staging=True)
        return convert(self.path, exc)

    async def _stage_aiosqlite(self, tx: Any, requests: Sequence[EnqueueRequest]) -> list[str]:
        """`outbox_stage` through an aiosqlite connection: the same statements, run on its own
        thread (where its sqlite3 connection lives) inside its open transaction."""
        if sqlite3.__name__ != "sqlite3":
            # aiosqlite runs Python's own sqlite3; the driver another copy of SQLite.
            raise OutboxOtherSqliteError("sqlite3 (aiosqlite's)", sqlite3.__name__, self.path)
        if not tx.in_transaction:
            raise OutboxNoSqliteTxError(_AIOSQLITE_BEGIN)
        now = self.clock.now_ms()
        ids = new_ids(len(requests), now)
        rows = [
            {"id": row_id, "staged_at": now, "request": request.to_json()}
            for row_id, request in zip(ids, requests, strict=True)
        ]
        try:
            self._same_file(await tx.execute_fetchall("PRAGMA database_list"), aio=True)
            if rows:
                await tx.executemany(q.STAGE, rows)
        except (sqlite3.Error, *UNBINDABLE) as exc:
            waited = None
            if is_busy(exc):
                with contextlib.suppress(sqlite3.Error):
                    ((waited,),) = await tx.execute_fetchall("PRAGMA busy_timeout")
            raise self._stage_failed(exc, waited) from exc
        return ids

    def _same_file(self, databases: Iterable[Any], *, aio: bool = False) -> None:
        """Refuse a connection (its `PRAGMA database_list`; `aio`: an aiosqlite one) whose
        main database is not the jobs' file."""
        # A row staged into another file would never be published, and WAL commits are atomic
        # per file only, so an ATTACHed jobs file would not share the app's transaction either.
        for _seq, schema, filename in databases:
            if schema == "main":
                if not filename or file_key(filename) != file_key(self.path):
                    raise OutboxOtherFileError(self.path, filename or ":memory:", aio=aio)
                return

    async def outbox_claim(
        self, relay_id: str, token: str, limit: int, lease_ms: int
    ) -> list[OutboxRow]:
        now = self.clock.now_ms()
        return await self._exec.run(lambda c: ledgers.outbox_claim(c, token, limit, lease_ms, now))

    async def outbox_publish(self, token: str, rows: Sequence[OutboxRow]) -> list[EnqueueResult]:
        now = self.clock.now_ms()
        wanted = list(rows)
        results, inserted = await self._exec.run(
            lambda c: ledgers.outbox_publish(c, self.path, token, wanted, now)
        )
        if inserted:
            self._wake().notify()
            self._changed()
        return results

    async def outbox_release(self, token: str, ids: Sequence[str]) -> None:
        wanted = list(ids)
        await self._exec.run(lambda c: ledgers.outbox_release(c, token, wanted))

    async def outbox_waiting(self, limit: int) -> OutboxWaiting:
        return await self._exec.run(lambda c: ledgers.outbox_waiting(c, limit), write=False)

    async def outbox_forget_published(self, published_before: int, limit: int) -> int:
        return await self._exec.run(
            lambda c: ledgers.outbox_forget_published(c, published_before, limit)
        )

    # --- history and leader leases (retention.py) ---------------------------------------------

    async def prune_counts(
        self, cutoffs: Cutoffs, tenant_id: str | None = None
    ) -> list[PruneCount]:
        return await self._exec.run(
            lambda c: retention.prune_counts(c, cutoffs, tenant_id), write=False
        )

    async def prune(
        self, cutoffs: Cutoffs, limit: int, tenant_id: str | None = None
    ) -> list[PruneCount]:
        pruned = await self._exec.run(lambda c: retention.prune(c, cutoffs, limit, tenant_id))
        if pruned:
            self._changed()
        return pruned

    async def count_jobless_events(self, before: int) -> int:
        return await self._exec.run(
            lambda c: retention.count_jobless_events(c, before), write=False
        )

    async def forget_jobless_events(self, before: int, limit: int) -> int:
        return await self._exec.run(lambda c: retention.forget_jobless_events(c, before, limit))

    async def lead(self, name: str, holder: str, lease_ms: int) -> bool:
        now = self.clock.now_ms()
        return await self._exec.run(lambda c: retention.lead(c, name, holder, lease_ms, now))

    async def lead_many(self, names: Sequence[str], holder: str, lease_ms: int) -> set[str]:
        now = self.clock.now_ms()
        return await self._exec.run(lambda c: retention.lead_many(c, names, holder, lease_ms, now))

    # --- published descriptors (descriptors.py) ------------------------------------------------

    async def publish_descriptors(
        self, worker_id: str, descriptors: Sequence[JobDescriptor], now: int
    ) -> None:
        items = list(descriptors)
        await self._exec.run(lambda c: descriptors_sql.publish(c, worker_id, items, now))
        self._changed()

    async def published_descriptors(self, name: str | None = None) -> list[JobDescriptor]:
        return await self._exec.run(lambda c: descriptors_sql.published(c, name), write=False)

    async def forget_descriptors(self, published_before: int) -> int:
        forgotten = await self._exec.run(lambda c: descriptors_sql.forget(c, published_before))
        if forgotten:
            self._changed()
        return forgotten

    # --- rate limits (rate_limits.py) ---------------------------------------------------------

    async def take_rates(
        self, takes: Sequence[RateTake], now: int, job_id: str | None = None, up_to: int = 1
    ) -> RateVerdict:
        return await self._exec.run(lambda c: rates_sql.take(c, takes, now, job_id, up_to))

    async def rate_states(self, limit: int, prefix: str = "") -> list[RateState]:
        return await self._exec.run(lambda c: rates_sql.states(c, limit, prefix), write=False)

    async def forget_idle_rates(self, tat_before: int, limit: int) -> int:
        return await self._exec.run(lambda c: rates_sql.forget_idle(c, tat_before, limit))

    async def rate_reservations(self, limit: int) -> list[RateReservation]:
        return await self._exec.run(lambda c: rates_sql.reservations(c, limit), write=False)

    # --- pauses (pauses.py) -------------------------------------------------------------------

    async def pause(
        self, kind: PauseKind, name: str, actor: str | None, reason: str | None, now: int
    ) -> tuple[Pause, bool]:
        found = await self._exec.run(lambda c: pauses_sql.pause(c, kind, name, actor, reason, now))
        if not found[1]:
            self._changed()
        return found

    async def resume(self, kind: PauseKind, name: str) -> Pause | None:
        lifted = await self._exec.run(lambda c: pauses_sql.resume(c, kind, name))
        if lifted is not None:
            # Held jobs are claimable again: this process's idle workers look now (others see
            # the commit through data_version at their next poll).
            self._wake().notify()
            self._changed()
        return lifted

    async def pauses(self) -> list[Pause]:
        return await self._exec.run(pauses_sql.pauses, write=False)

    # --- progress (progress.py) ---------------------------------------------------------------

    async def save_progress(self, job_id: str, token: str, progress: Progress) -> bool:
        return await self._exec.run(lambda c: progress_sql.save(c, job_id, token, progress))

    # --- settled counts (settled_counts.py) ---------------------------------------------------

    async def settled_counts(
        self, since_ms: int, until_ms: int, *, tenant_id: str | None = None
    ) -> dict[str, SettledCount]:
        return await self._exec.run(
            lambda c: settled_sql.settled_counts(c, since_ms, until_ms, tenant_id), write=False
        )

    # --- reruns (reruns.py) -------------------------------------------------------------------

    async def rerun(
        self,
        job_id: str,
        tenant_id: str | None,
        from_step: str,
        include_cancelled: bool,
        actor: str | None,
        new_run_id: str,
    ) -> JobRecord:
        now = self.clock.now_ms()
        record = await self._exec.run(
            lambda c: reruns_sql.rerun(
                c, job_id, tenant_id, from_step, include_cancelled, actor, new_run_id, now
            )
        )
        self._wake().notify()
        self._changed()
        return record

    async def run_steps(self, job_id: str, run_id: str, tenant_id: str | None) -> list[StepRecord]:
        return await self._exec.run(
            lambda c: reruns_sql.run_steps(c, job_id, run_id, tenant_id), write=False
        )

    # --- inbound events (inbound_events.py) ---------------------------------------------------

    async def send_event(self, event: InboundEvent, now: int) -> int:
        woken = await self._exec.run(lambda c: events_sql.send(c, event, now))
        if woken:
            # This process's idle workers look now; others see the commit at their next poll.
            self._wake().notify()
            self._changed()
        return woken

    async def first_event(
        self,
        name: str,
        key: str,
        tenant_id: str | None,
        started_at: int,
        after: EventCursor | None,
    ) -> InboundEvent | None:
        return await self._exec.run(
            lambda c: events_sql.first(c, name, key, tenant_id, started_at, after), write=False
        )

    async def await_event(self, job_id: str, name: str, key: str, tenant_id: str | None) -> None:
        await self._exec.run(lambda c: events_sql.await_event(c, job_id, name, key, tenant_id))

    async def forget_waiter(self, job_id: str) -> None:
        await self._exec.run(lambda c: events_sql.forget(c, job_id))

    async def wake_waiter(self, job_id: str, now: int) -> bool:
        woke = await self._exec.run(lambda c: events_sql.wake_one(c, job_id, now))
        if woke:
            self._wake().notify()
            self._changed()
        return woke

    async def prune_events(self, now: int) -> int:
        return await self._exec.run(lambda c: events_sql.prune(c, now))


__all__ = ["COMMIT_POLL_MS", "SqliteDriver"]
