"""`PostgresDriver`: the driver Protocol over asyncpg, in its own PostgreSQL schema.

A thin front: it reads the injected clock and delegates to the modules that own each part —
connections.py (pool, own connections, retries via retry.py), enqueue.py, claims.py, batch.py
(the set-wise settle writes), jobs.py, ledgers.py, outbox.py, wake.py, descriptors.py.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from typing import Any

from engine.changes import ChangeFeed
from engine.clock import MONOTONIC_CLOCK, SYSTEM_CLOCK, Clock, ServerClock, agree, server_clock
from engine.drivers.base import AckWrite, RunPosition, StepWrite, StoreReport
from engine.drivers.closing import closable
from engine.drivers.installed import StoreAbsent
from engine.drivers.postgres import descriptors as descriptors_sql
from engine.drivers.postgres import inbound_events as events_sql
from engine.drivers.postgres import jobs, ledgers, outbox, retention, server_time
from engine.drivers.postgres import pauses as pauses_sql
from engine.drivers.postgres import progress as progress_sql
from engine.drivers.postgres import rate_limits as rates_sql
from engine.drivers.postgres import report as report_sql
from engine.drivers.postgres import reruns as reruns_sql
from engine.drivers.postgres import settled_counts as settled_sql
from engine.drivers.postgres.batch import SetWrites
from engine.drivers.postgres.claims import Claimer
from engine.drivers.postgres.connections import Connections
from engine.drivers.postgres.enqueue import Enqueuer
from engine.drivers.postgres.migrate import InstallFrom
from engine.drivers.postgres.retry import Retrier
from engine.drivers.postgres.schema_version import current_version, installed_schemas
from engine.drivers.postgres.sql import check_schema_name, latest_version
from engine.drivers.postgres.sweep import Sweeper
from engine.drivers.postgres.wake import NotifyListener, WakeSignal
from engine.drivers.schema_versions import Migrated, version_words
from engine.drivers.urls import SCHEMA_PARAM, migrate_fix, naming, split_schema
from engine.errors import InvalidArgumentError, JobsError
from engine.inbound_events import EventCursor, InboundEvent
from engine.rate_limits import RateReservation, RateState, RateTake, RateVerdict
from engine.retention import Cutoffs, PruneCount
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

# A follower's lease (see wait_for_change): refreshed by its waits, outliving a few of them.
FOLLOW_LEASE_MS = 90_000
FOLLOW_REFRESH_MS = 20_000

DEFAULT_SCHEMA = "mcp_jobs"
# The job states a nack leaves waiting: a worker may claim them, so waiters are woken.
_REQUEUED = ("ready", "delayed", "suspended")


def _whole(name: str, value: object, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise InvalidArgumentError(name, value, f"a whole number ≥ {low}")
    return value


@closable
class PostgresDriver:
    """The driver Protocol over an asyncpg pool, in its own PostgreSQL schema."""

    kind = "postgres"

    def __init__(
        self,
        url: str,
        *,
        clock: Clock = SYSTEM_CLOCK,
        schema: str | None = None,
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
        an unreachable server before it fails, and any operation through a transaction the
        server rolled back (a deadlock); 0 fails at the first break. `settle_retry_ms`:
        how long an ack/nack/step write is held and retried while the server is unreachable
        (its fence decides, once it gets through, whether it still counts). A process that
        claims vacuums the jobs table when this many dead rows have piled up in it (sweep.py);
        0 leaves the table to autovacuum alone. `retry_clock` times the retries (tests)."""
        url, schema = _naming_schema(url, schema)
        _whole("pool_min", pool_min, 0)
        _whole("pool_max", pool_max, max(1, pool_min))
        _whole("statement_cache_size", statement_cache_size, 0)
        _whole("connect_timeout_ms", connect_timeout_ms, 1)
        _whole("retry_deadline_ms", retry_deadline_ms, 0)
        _whole("settle_retry_ms", settle_retry_ms, 0)
        _whole("vacuum_dead_rows", vacuum_dead_rows, 0)
        # Names the schema when it is not the default: fix lines and `db report` act on it.
        self.url = url
        # This machine's clock, read as the server reads its own (engine/clock.py).
        self.clock = clock = server_clock(clock, "postgres")
        if isinstance(clock, ServerClock):
            clock.keep = self._keep_time
        self.schema = schema
        self.listen = bool(listen)
        retry = Retrier(
            url,
            deadline_ms=retry_deadline_ms,
            settle_deadline_ms=settle_retry_ms,
            clock=retry_clock,
        )
        self.db = Connections(
            url,
            schema=schema,
            pool_min=pool_min,
            pool_max=pool_max,
            statement_cache_size=statement_cache_size,
            connect_timeout_ms=connect_timeout_ms,
            retry=retry,
        )
        self.signal = WakeSignal()
        self._listener = NotifyListener(
            self.db.dsn, self.db.channel, self.signal, self.db.connect_timeout_s
        )
        # Change signals (engine/changes.py): this process's writes move `changes` directly;
        # other processes' reach it through a listener of its own, started only by a reader
        # (wait_for_change), on the changes channel (settles) and the wake-up one (enqueues).
        self.changes = ChangeFeed()
        self._change_listener = NotifyListener(
            self.db.dsn,
            self.db.changes_channel,
            self.changes,
            self.db.connect_timeout_s,
            also=(self.db.channel,),
        )
        self._follower = f"{ledgers.FOLLOWERS_PREFIX}{uuid.uuid4().hex}"
        self._followed_at = -FOLLOW_REFRESH_MS
        self.enqueuer = Enqueuer(self.db, self.signal, clock)
        self.claimer = Claimer(self.db, clock, vacuum_dead_rows)
        self.writes = SetWrites(self.db, clock)

    @property
    def sweeper(self) -> Sweeper | None:
        """The jobs table's sweeper, made by this process's first claim."""
        return self.claimer.sweeper

    # --- lifecycle ----------------------------------------------------------------------------

    async def migrate(self) -> None:
        await self.migrate_with()

    async def migrate_versions(self) -> Migrated:
        applied = await self.migrate_with()
        version = await self.db.idempotent(lambda conn: current_version(conn, self.schema))
        words = version_words(version, latest_version(), migrate_fix(self.url))
        return Migrated(applied, f"schema {self.schema}: {words}")

    async def migrate_with(self, install_from: InstallFrom = "schema") -> list[int]:
        """`migrate()`, choosing how a fresh database is built (tests compare the two roads)."""
        applied = await self.db.migrate(self.clock.now_ms(), install_from)
        await self._keep_time()
        return applied

    async def store_absent(self) -> StoreAbsent | None:
        # Once, not through retries: a server that does not answer is the command's to tell.
        installed = await self.db.atomic(installed_schemas)
        if self.schema in installed:
            return None
        url = self.url
        return StoreAbsent("schema", self.schema, installed, lambda s: naming(url, SCHEMA_PARAM, s))

    async def server_report(self) -> StoreReport:
        return await report_sql.report(self.url, self.schema, self.db.connect_timeout_s)

    async def close(self) -> None:
        self.db.owner.check()  # before anything is stopped: another loop cannot close it
        await self.claimer.close()
        await self._listener.close()
        await self._change_listener.close()
        await self.db.close()
        self.signal.notify()
        self.changes.notify()
        # A step read still running when the pool closed has ended by now; let it hand its
        # callers their outcome before the driver is gone.
        await self.writes.idle()

    def let_go_of_held(self) -> int:
        """Held settles and retries stop waiting (retry.py `let_go`), for a worker stopped twice:
        what they carried is left to the jobs' leases. Answers how many settles were held."""
        return self.db.retry.let_go()

    # --- jobs ---------------------------------------------------------------------------------

    async def enqueue(
        self, requests: Sequence[EnqueueRequest], *, now: int | None = None
    ) -> list[EnqueueResult]:
        return self._enqueued(await self.enqueuer.enqueue(requests, now=now))

    def _enqueued(self, results: list[EnqueueResult]) -> list[EnqueueResult]:
        if any(not result.deduped for result in results):
            self.changes.notify()
        return results

    def _settled(self, outcomes: list[JobsError | None]) -> list[JobsError | None]:
        if any(outcome is None for outcome in outcomes):
            self.changes.notify()
        return outcomes

    async def enqueue_parts(
        self, parts: Iterable[Sequence[EnqueueRequest]], *, now: int | None = None
    ) -> list[EnqueueResult]:
        return self._enqueued(await self.enqueuer.enqueue_parts(parts, now=now))

    async def claim(
        self,
        worker_id: str,
        limit: int,
        lease_ms: int,
        queues: Sequence[str] | None = None,
        excluding: ClaimExclusion | None = None,
    ) -> list[ClaimedJob]:
        await agree(self.clock)  # a lease is compared with the server's time
        claimed = await self.claimer.claim(worker_id, limit, lease_ms, queues, excluding)
        if claimed:
            self.changes.notify()
        return claimed

    async def heartbeat(self, job_id: str, token: str, lease_ms: int) -> HeartbeatResult:
        return await self.claimer.heartbeat(job_id, token, lease_ms)

    async def ack_many(self, writes: Sequence[AckWrite]) -> list[JobsError | None]:
        return self._settled(await self.writes.ack_many(writes))

    async def nack(self, job_id: str, token: str, options: NackOptions) -> JobRecord:
        record = await jobs.nack(self.db, job_id, token, options, self.clock.now_ms())
        if record.state in _REQUEUED:
            self.signal.notify()
        self.changes.notify()
        return record

    async def get(self, job_id: str, tenant_id: str | None = None) -> JobRecord:
        return await jobs.get(self.db, job_id, tenant_id)

    async def list_jobs(self, filter: JobFilter) -> JobPage:
        return await jobs.list_jobs(self.db, filter)

    async def load_trace(
        self, job_id: str, tenant_id: str | None = None, page: TraceQuery | None = None
    ) -> TracePage:
        return await jobs.load_trace(self.db, job_id, tenant_id, page or TraceQuery())

    async def stats(
        self, queues: Sequence[str] | None = None, *, tenant_id: str | None = None
    ) -> list[QueueStats]:
        return await jobs.stats(self.db, self.clock.now_ms(), queues, tenant_id)

    async def cancel(self, job_id: str, tenant_id: str | None, actor: str | None) -> JobRecord:
        record = await jobs.cancel(self.db, job_id, tenant_id, actor, self.clock.now_ms())
        self.changes.notify()
        return record

    async def retry(
        self, job_id: str, tenant_id: str | None, include_cancelled: bool, actor: str | None
    ) -> JobRecord:
        now = self.clock.now_ms()
        record = await jobs.retry(self.db, job_id, tenant_id, include_cancelled, actor, now)
        self.signal.notify()
        self.changes.notify()
        return record

    async def record_event(self, event: EventRecord) -> None:
        await jobs.record_event(self.db, event)

    # --- steps (rule 6) -----------------------------------------------------------------------

    async def load_steps(self, run_id: str) -> list[StepRecord]:
        return await self.writes.load_steps(run_id)

    async def save_steps_many(self, writes: Sequence[StepWrite]) -> list[JobsError | None]:
        return self._settled(await self.writes.save_steps_many(writes))

    # --- limiter slots ------------------------------------------------------------------------

    async def acquire_slots(
        self, job_id: str, caps: Sequence[tuple[str, int]], expires_at: int
    ) -> str | None:
        return await ledgers.acquire_slots(self.db, job_id, caps, self.clock.now_ms(), expires_at)

    async def release_slots(self, job_id: str) -> None:
        await ledgers.release_slots(self.db, job_id)

    # --- workers ------------------------------------------------------------------------------

    async def worker_seen(self, info: WorkerInfo) -> None:
        await ledgers.worker_seen(self.db, info, self.clock.now_ms())
        await self._keep_time()

    async def _keep_time(self) -> None:
        """Measure the server's clock (also the `ServerClock`'s `keep`)."""
        clock = self.clock
        if isinstance(clock, ServerClock):
            await server_time.measure(self.db, clock)

    async def worker_gone(self, worker_id: str) -> None:
        await ledgers.worker_gone(self.db, worker_id)

    async def live_workers(self, seen_since: int) -> list[WorkerInfo]:
        return await ledgers.live_workers(self.db, seen_since)

    # --- wake-ups -----------------------------------------------------------------------------

    async def start_listening(self) -> bool:
        """Listen for other processes' enqueues now; False when `listen=False` or the server is
        away (waits then poll)."""
        if not self.listen or self.db.closed:
            return False
        self.db.owner.check()
        return await self._listener.ensure()

    async def wait_for_work(self, timeout_ms: int) -> None:
        if self.db.closed:
            return
        self.db.owner.check()
        if self.listen:
            self._listener.kick()  # never waits for the connect: polling covers until it is up
        await self.signal.wait(self.clock, timeout_ms)

    async def start_listening_for_changes(self) -> bool:
        """Listen for other processes' changes now (wait_for_change only starts it in the
        background); False when `listen=False` or the server is away."""
        if not self.listen or self.db.closed:
            return False
        self.db.owner.check()
        return await self._change_listener.ensure()

    async def wait_for_change(self, seen: int, timeout_ms: int) -> int:
        """This process's writes at once; other processes' enqueues and settles as their NOTIFY
        arrives (claims, nacks and cancels elsewhere: at the reader's `timeout_ms`). Workers
        NOTIFY settles only while a follower's lease is live: this keeps one, from their next
        presence beat on (engine.worker_presence.PRESENCE_MS)."""
        if self.listen and not self.db.closed:
            self.db.owner.check()
            self._change_listener.kick()  # its connect notifies: what it missed is looked at
            await self._follow()
        return await self.changes.wait(seen, self.clock, timeout_ms)

    async def _follow(self) -> None:
        now = self.clock.now_ms()
        if now - self._followed_at < FOLLOW_REFRESH_MS:
            return
        try:
            await self.lead(self._follower, self._follower, FOLLOW_LEASE_MS)
            self._followed_at = now
        except JobsError:
            pass  # the database is away: the reader's timeout re-reads, and this retries next

    # --- backfill ledger ----------------------------------------------------------------------

    async def backfill_save(self, run: BackfillRun) -> None:
        await ledgers.backfill_save(self.db, run)
        self.changes.notify()

    async def backfill_runs(
        self,
        name: str | None = None,
        environment: str | None = None,
        *,
        status: BackfillStatus | None = None,
        before: RunPosition | None = None,
        limit: int | None = None,
    ) -> list[BackfillRun]:
        return await ledgers.backfill_runs(
            self.db, name, environment, status=status, before=before, limit=limit
        )

    # --- scheduler ----------------------------------------------------------------------------

    async def task_state(self, task: str) -> TaskState | None:
        return await ledgers.task_state(self.db, task)

    async def task_claim(self, task: str, expected: int | None, occurrence_ms: int) -> bool:
        now = self.clock.now_ms()
        return await ledgers.task_claim(self.db, task, expected, occurrence_ms, now)

    async def task_fire(
        self,
        task: str,
        expected: int | None,
        occurrences: Sequence[int],
        requests: Sequence[EnqueueRequest],
    ) -> list[EnqueueResult] | None:
        now = self.clock.now_ms()
        results = await ledgers.task_fire(
            self.db, self.enqueuer, task, expected, occurrences[-1], requests, now
        )
        return None if results is None else self._enqueued(results)

    async def task_unfinished(self, task: str) -> list[int]:
        return []  # task_fire claims and enqueues in one transaction

    async def task_finished(self, task: str, occurrences: Sequence[int]) -> None:
        return None

    async def task_failure(self, task: str, failure: TaskFailure) -> None:
        await ledgers.task_failure(self.db, task, failure, self.clock.now_ms())

    # --- outbox -------------------------------------------------------------------------------

    async def outbox_stage(self, tx: Any, requests: Sequence[EnqueueRequest]) -> list[str]:
        return await outbox.stage(self.db, tx, requests, self.clock.now_ms())

    async def outbox_claim(
        self, relay_id: str, token: str, limit: int, lease_ms: int
    ) -> list[OutboxRow]:
        return await outbox.claim(self.db, token, limit, lease_ms, self.clock.now_ms())

    async def outbox_publish(self, token: str, rows: Sequence[OutboxRow]) -> list[EnqueueResult]:
        now = self.clock.now_ms()
        return self._enqueued(await outbox.publish(self.db, self.enqueuer, token, rows, now))

    async def outbox_release(self, token: str, ids: Sequence[str]) -> None:
        await outbox.release(self.db, token, ids)

    async def outbox_waiting(self, limit: int) -> OutboxWaiting:
        return await outbox.waiting(self.db, limit)

    async def outbox_forget_published(self, published_before: int, limit: int) -> int:
        return await outbox.forget_published(self.db, published_before, limit)

    # --- history and leader leases (retention.py) ---------------------------------------------

    async def prune_counts(
        self, cutoffs: Cutoffs, tenant_id: str | None = None
    ) -> list[PruneCount]:
        return await retention.prune_counts(self.db, cutoffs, tenant_id)

    async def prune(
        self, cutoffs: Cutoffs, limit: int, tenant_id: str | None = None
    ) -> list[PruneCount]:
        pruned = await retention.prune(self.db, cutoffs, limit, tenant_id)
        if pruned:
            self.changes.notify()
        return pruned

    async def count_jobless_events(self, before: int) -> int:
        return await retention.count_jobless_events(self.db, before)

    async def forget_jobless_events(self, before: int, limit: int) -> int:
        return await retention.forget_jobless_events(self.db, before, limit)

    async def lead(self, name: str, holder: str, lease_ms: int) -> bool:
        return await retention.lead(self.db, name, holder, lease_ms, self.clock.now_ms())

    async def lead_many(self, names: Sequence[str], holder: str, lease_ms: int) -> set[str]:
        return await retention.lead_many(self.db, names, holder, lease_ms, self.clock.now_ms())

    # --- published descriptors (descriptors.py) -----------------------------------------------

    async def publish_descriptors(
        self, worker_id: str, descriptors: Sequence[JobDescriptor], now: int
    ) -> None:
        await descriptors_sql.publish(self.db, worker_id, descriptors, now)
        self.changes.notify()

    async def published_descriptors(self, name: str | None = None) -> list[JobDescriptor]:
        return await descriptors_sql.published(self.db, name)

    async def forget_descriptors(self, published_before: int) -> int:
        forgotten = await descriptors_sql.forget(self.db, published_before)
        if forgotten:
            self.changes.notify()
        return forgotten

    # --- rate limits (rate_limits.py) ---------------------------------------------------------

    async def take_rates(
        self, takes: Sequence[RateTake], now: int, job_id: str | None = None, up_to: int = 1
    ) -> RateVerdict:
        return await rates_sql.take(self.db, takes, now, job_id, up_to)

    async def rate_states(self, limit: int, prefix: str = "") -> list[RateState]:
        return await rates_sql.states(self.db, limit, prefix)

    async def forget_idle_rates(self, tat_before: int, limit: int) -> int:
        return await rates_sql.forget_idle(self.db, tat_before, limit)

    async def rate_reservations(self, limit: int) -> list[RateReservation]:
        return await rates_sql.reservations(self.db, limit)

    # --- pauses (pauses.py) -------------------------------------------------------------------

    async def pause(
        self, kind: PauseKind, name: str, actor: str | None, reason: str | None, now: int
    ) -> tuple[Pause, bool]:
        found = await pauses_sql.pause(self.db, kind, name, actor, reason, now)
        self.claimer.forget_pauses()
        if not found[1]:
            self.changes.notify()
        return found

    async def resume(self, kind: PauseKind, name: str) -> Pause | None:
        lifted = await pauses_sql.resume(self.db, kind, name)
        self.claimer.forget_pauses()
        if lifted is not None:
            self.changes.notify()
        return lifted

    async def pauses(self) -> list[Pause]:
        return await pauses_sql.pauses(self.db)

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
        record = await reruns_sql.rerun(
            self.db, job_id, tenant_id, from_step, include_cancelled, actor, new_run_id, now
        )
        self.signal.notify()
        self.changes.notify()
        return record

    async def run_steps(self, job_id: str, run_id: str, tenant_id: str | None) -> list[StepRecord]:
        return await reruns_sql.run_steps(self.db, job_id, run_id, tenant_id)

    # --- progress (progress.py) ---------------------------------------------------------------

    async def save_progress(self, job_id: str, token: str, progress: Progress) -> bool:
        return await progress_sql.save(self.db, job_id, token, progress)

    # --- settled counts (settled_counts.py) ---------------------------------------------------

    async def settled_counts(
        self, since_ms: int, until_ms: int, *, tenant_id: str | None = None
    ) -> dict[str, SettledCount]:
        return await settled_sql.settled_counts(self.db, since_ms, until_ms, tenant_id)

    # --- inbound events (inbound_events.py) ---------------------------------------------------

    async def send_event(self, event: InboundEvent, now: int) -> int:
        woken = await events_sql.send(self.db, event, now)
        if woken:
            self.changes.notify()
        return woken

    async def first_event(
        self,
        name: str,
        key: str,
        tenant_id: str | None,
        started_at: int,
        after: EventCursor | None,
    ) -> InboundEvent | None:
        return await events_sql.first(self.db, name, key, tenant_id, started_at, after)

    async def await_event(self, job_id: str, name: str, key: str, tenant_id: str | None) -> None:
        await events_sql.await_event(self.db, job_id, name, key, tenant_id)

    async def forget_waiter(self, job_id: str) -> None:
        await events_sql.forget(self.db, job_id)

    async def wake_waiter(self, job_id: str, now: int) -> bool:
        return await events_sql.wake_one(self.db, job_id, now)

    async def prune_events(self, now: int) -> int:
        return await events_sql.prune(self.db, now)


def _naming_schema(url: str, schema: str | None) -> tuple[str, str]:
    """The URL naming the schema the tables live in, and that schema: `schema=` if given, else
    the URL's `?schema=`, else the default."""
    url_schema = split_schema(url)[1]
    chosen = schema if schema is not None else url_schema or DEFAULT_SCHEMA
    check_schema_name(chosen)
    if chosen == (url_schema or DEFAULT_SCHEMA):
        return url, chosen
    return naming(url, SCHEMA_PARAM, chosen), chosen
