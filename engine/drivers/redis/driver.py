"""The Redis driver: the capabilities of `Driver` over redis-py's asyncio client.

Each method converts Redis and network failures into DRIVER_UNAVAILABLE (connection.guard) and
hands the work to the module that owns it. Works on one Redis server (standalone, or a Sentinel
primary): the scripts touch keys they compute from the prefix, which Redis Cluster refuses.
Offers the optional pauses, progress, inbound events, rate limits, reruns and change signals
(a module each).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, TypeVar

from redis.asyncio.client import Pipeline

from engine import bounds
from engine.clock import MONOTONIC_CLOCK, Clock, ServerClock, agree, server_clock
from engine.drivers.base import AckWrite, RunPosition, StepWrite, StoreReport
from engine.drivers.closing import closable
from engine.drivers.holding import Holds, hold, settle_of
from engine.drivers.installed import StoreAbsent
from engine.drivers.redis import (
    claims,
    enqueue,
    inbound_events,
    jobless_events,
    keeping,
    ledgers,
    migration,
    operator,
    outbox,
    presence,
    rate_limits,
    reads,
    report,
    reruns,
    retention,
    scheduler,
    server_time,
    slots,
    steps,
)
from engine.drivers.redis import descriptors as published
from engine.drivers.redis import pauses as pause_store
from engine.drivers.redis import progress as progress_store
from engine.drivers.redis import settled_counts as settled
from engine.drivers.redis import stats as stats_store
from engine.drivers.redis.changes import ChangeListener
from engine.drivers.redis.connection import (
    PREFIX_PARAM,
    REPLY_TIMEOUT_S,
    Fixes,
    guard,
    open_client,
    passes,
    resolve_prefix,
    split_prefix,
)
from engine.drivers.redis.installed import prefix_absent
from engine.drivers.redis.keys import DEFAULT_PREFIX, Keys
from engine.drivers.redis.lost import LostJobs
from engine.drivers.redis.report import named
from engine.drivers.redis.store import Store
from engine.drivers.redis.wake import WakeListener
from engine.drivers.schema_versions import Migrated, version_words
from engine.drivers.urls import migrate_fix, naming
from engine.errors import JobsError
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

SCHEMA_VERSION = "1"
logger = logging.getLogger("mcp_jobs.redis")

T = TypeVar("T")


@closable
class RedisDriver:
    kind = "redis"

    def __init__(
        self,
        url: str,
        *,
        clock: Clock,
        prefix: str | None = None,
        connect_timeout_s: float = 5.0,
        reply_timeout_s: float = REPLY_TIMEOUT_S,
        settle_retry_ms: int = 300_000,
        retry_clock: Clock = MONOTONIC_CLOCK,
    ) -> None:
        """`settle_retry_ms`: how long a settle (ack, nack, step write) is held and tried again
        through dropped connections before it fails (its lease then hands the job on).
        `reply_timeout_s`: how long a command waits for the server's reply before it fails as
        DRIVER_UNAVAILABLE (a server stopped, blocked or overloaded)."""
        # This machine's clock, read as the server reads its own (engine/clock.py).
        self.clock = clock = server_clock(clock, "redis")
        if isinstance(clock, ServerClock):
            clock.keep = self._agree
        # Up to a day: a settle held longer outlives any lease that waits for it.
        self._settle_retry_ms = bounds.whole("settle_retry_ms", settle_retry_ms, 0, 86_400_000)
        self._retry_clock = retry_clock
        self._holds = Holds()  # the settles held through an outage (let_go_of_held)
        self._closed = False  # set by close() (closing.closable)
        client_url, url_prefix = split_prefix(url)
        keys = Keys(resolve_prefix(url, prefix))
        if keys.prefix != (url_prefix or DEFAULT_PREFIX):
            # Chosen by `prefix=`: fix lines and `db report` must name it to act on these keys.
            url = naming(url, PREFIX_PARAM, keys.prefix)
        self._url = url
        self._connect_timeout_s = connect_timeout_s
        reply_timeout_s = bounds.number(
            "reply_timeout_s", reply_timeout_s, 0.1, 3600, whole=False, unit="seconds"
        )
        client = open_client(client_url, connect_timeout_s, reply_timeout_s)
        self._fixes = Fixes(url, keys, client)
        # Subscriptions wait for messages as long as none comes: a pool of their own, with no
        # reply timeout (redis-py before 8 applies it to a subscriber's reads too).
        self._subscriber = subscriber = open_client(client_url, connect_timeout_s, None)
        lost = LostJobs(client, keys, clock, self._fixes.report)
        self._store = Store(client, keys, clock, WakeListener(subscriber, keys.wake), lost)
        self._changes = ChangeListener(client, keys, subscriber)

    @property
    def prefix(self) -> str:
        return self._store.keys.prefix

    def transaction(self) -> Pipeline:
        """An application transaction on this server (MULTI/EXEC), for `outbox_stage`."""
        return self._store.client.pipeline(transaction=True)

    async def migrate(self) -> None:
        await self.migrate_versions()

    async def migrate_versions(self) -> Migrated:
        """`migrate()`; `db migrate` says whether it installed the prefix (its one version)."""
        # Writes nothing on a store at this version: one at maxmemory can still be opened.
        async with guard(self._fixes):
            installed = await migration.migrate(self._store, SCHEMA_VERSION)
            await self._keep_time()
            kept = await keeping.read(self._store.client)
            stored = await migration.stored_version(self._store)
        for warning in kept.warnings(self._fixes.report):
            logger.warning("%s", warning)
        latest = int(SCHEMA_VERSION)
        words = version_words(stored, latest, migrate_fix(self._url))
        return Migrated([latest] if installed else [], f"{named(self.prefix)}: {words}")

    async def store_absent(self) -> StoreAbsent | None:
        async with guard(self._fixes):
            return await prefix_absent(self._store.client, self._store.keys, self._url)

    async def server_report(self) -> StoreReport:
        return await report.report(self._url, self.prefix, self._connect_timeout_s, SCHEMA_VERSION)

    async def close(self) -> None:
        await self._changes.close()
        await self._store.wake.close()
        await self._store.client.aclose()
        await self._subscriber.aclose()

    def let_go_of_held(self) -> int:
        """Held settles stop waiting and fail at their next try (holding.py `Holds.let_go`),
        for a worker stopped twice: what they carried is left to the jobs' leases. Answers how
        many settles were held."""
        return self._holds.let_go()

    # --- jobs ---------------------------------------------------------------------------------

    async def enqueue(
        self, requests: Sequence[EnqueueRequest], *, now: int | None = None
    ) -> list[EnqueueResult]:
        async with guard(self._fixes):
            at = self.clock.now_ms() if now is None else now
            return await enqueue.enqueue(self._store, requests, at)

    async def enqueue_parts(
        self, parts: Iterable[Sequence[EnqueueRequest]], *, now: int | None = None
    ) -> list[EnqueueResult]:
        # One script keeps the batch atomic, so the parts are built first and sent together.
        return await self.enqueue([request for part in parts for request in part], now=now)

    async def claim(
        self,
        worker_id: str,
        limit: int,
        lease_ms: int,
        queues: Sequence[str] | None = None,
        excluding: ClaimExclusion | None = None,
    ) -> list[ClaimedJob]:
        async with guard(self._fixes):
            await agree(self.clock)  # a lease is compared with the server's time
            return await claims.claim(
                self._store, worker_id, limit, lease_ms, queues, self._fixes, excluding
            )

    async def heartbeat(self, job_id: str, token: str, lease_ms: int) -> HeartbeatResult:
        async with guard(self._fixes):
            return await claims.heartbeat(self._store, job_id, token, lease_ms)

    def _held(self, what: str, settle: Callable[[bool], Awaitable[T]]) -> Awaitable[T]:
        """`settle(again)` (`what`, for the log) held through an outage; `again` from the
        second try on, when the try before may have landed with its reply lost."""
        tries = 0

        async def guarded() -> T:
            nonlocal tries
            tries += 1
            async with guard(self._fixes):
                return await settle(tries > 1)

        return hold(
            guarded,
            within_ms=self._settle_retry_ms,
            clock=self._retry_clock,
            stopped=lambda: self._closed,
            driver=self.kind,
            what=what,
            holds=self._holds,
            passes=passes,
        )

    async def ack_many(self, writes: Sequence[AckWrite]) -> list[JobsError | None]:
        what = settle_of("ack", [w.job_id for w in writes])
        return await self._held(what, lambda again: claims.ack_many(self._store, writes, again))

    async def nack(self, job_id: str, token: str, options: NackOptions) -> JobRecord:
        return await self._held(
            settle_of("nack", [job_id]),
            lambda again: claims.nack(self._store, job_id, token, options, again),
        )

    async def get(self, job_id: str, tenant_id: str | None = None) -> JobRecord:
        async with guard(self._fixes):
            return await reads.get(self._store, job_id, tenant_id)

    async def list_jobs(self, filter: JobFilter) -> JobPage:
        async with guard(self._fixes):
            return await reads.list_jobs(self._store, filter, self._fixes)

    async def load_trace(
        self, job_id: str, tenant_id: str | None = None, page: TraceQuery | None = None
    ) -> TracePage:
        async with guard(self._fixes):
            return await reads.load_trace(self._store, job_id, tenant_id, page)

    async def stats(
        self, queues: Sequence[str] | None = None, *, tenant_id: str | None = None
    ) -> list[QueueStats]:
        async with guard(self._fixes):
            return await stats_store.stats(self._store, queues, tenant_id)

    async def cancel(self, job_id: str, tenant_id: str | None, actor: str | None) -> JobRecord:
        async with guard(self._fixes):
            return await operator.cancel(self._store, job_id, tenant_id, actor)

    async def retry(
        self, job_id: str, tenant_id: str | None, include_cancelled: bool, actor: str | None
    ) -> JobRecord:
        async with guard(self._fixes):
            return await operator.retry(self._store, job_id, tenant_id, include_cancelled, actor)

    async def record_event(self, event: EventRecord) -> None:
        async with guard(self._fixes):
            await operator.record_event(self._store, event)

    # --- steps --------------------------------------------------------------------------------

    async def load_steps(self, run_id: str) -> list[StepRecord]:
        async with guard(self._fixes):
            return await steps.load_steps(self._store, run_id)

    async def save_steps_many(self, writes: Sequence[StepWrite]) -> list[JobsError | None]:
        # A step written twice is the same record: no `again` needed.
        what = settle_of("step write", [w.job_id for w in writes])
        return await self._held(what, lambda _: steps.save_steps_many(self._store, writes))

    # --- limiter slots ------------------------------------------------------------------------

    async def acquire_slots(
        self, job_id: str, caps: Sequence[tuple[str, int]], expires_at: int
    ) -> str | None:
        async with guard(self._fixes):
            return await slots.acquire_slots(self._store, job_id, caps, expires_at)

    async def release_slots(self, job_id: str) -> None:
        async with guard(self._fixes):
            await slots.release_slots(self._store, job_id)

    # --- workers and wake-ups -----------------------------------------------------------------

    async def worker_seen(self, info: WorkerInfo) -> None:
        async with guard(self._fixes):
            there, epoch = await presence.worker_seen(self._store, info)
            # Its version key gone, the store was reset under this process (lost.py says so):
            # installed again, as at this process's start, so the CLI reads it (it refuses a
            # prefix with no version key) and `db report` counts the jobs written since.
            reinstalled = not there and await migration.migrate(self._store, SCHEMA_VERSION)
            await self._store.lost.look(there or reinstalled, epoch, reinstalled=reinstalled)
            await self._keep_time()

    async def _keep_time(self) -> None:
        """Measure the server's clock (`TIME`). Call inside `guard`."""
        clock = self.clock
        if isinstance(clock, ServerClock):
            client = self._store.client
            await clock.measure(lambda: server_time.read_ms(client))

    async def _agree(self) -> None:
        """The `ServerClock`'s `keep`."""
        async with guard(self._fixes):
            await self._keep_time()

    async def worker_gone(self, worker_id: str) -> None:
        async with guard(self._fixes):
            await presence.worker_gone(self._store, worker_id)

    async def live_workers(self, seen_since: int) -> list[WorkerInfo]:
        async with guard(self._fixes):
            return await presence.live_workers(self._store, seen_since)

    async def wait_for_work(self, timeout_ms: int) -> None:
        await self._store.wake.wait(self.clock, timeout_ms)

    async def wait_for_change(self, seen: int, timeout_ms: int) -> int:
        """Any process's write on this server as its script publishes it (changes.py). Writes
        are counted only while some reader is subscribed: the first wait subscribes, and a
        reader re-reads after it anyway."""
        return await self._changes.wait(seen, self.clock, timeout_ms)

    # --- backfill ledger ----------------------------------------------------------------------

    async def backfill_save(self, run: BackfillRun) -> None:
        async with guard(self._fixes):
            await ledgers.backfill_save(self._store, run)

    async def backfill_runs(
        self,
        name: str | None = None,
        environment: str | None = None,
        *,
        status: BackfillStatus | None = None,
        before: RunPosition | None = None,
        limit: int | None = None,
    ) -> list[BackfillRun]:
        async with guard(self._fixes):
            return await ledgers.backfill_runs(
                self._store, name, environment, status, before, limit
            )

    # --- scheduler and leader leases ----------------------------------------------------------

    async def task_state(self, task: str) -> TaskState | None:
        async with guard(self._fixes):
            return await scheduler.task_state(self._store, task)

    async def task_claim(self, task: str, expected: int | None, occurrence_ms: int) -> bool:
        async with guard(self._fixes):
            return await scheduler.task_claim(self._store, task, expected, occurrence_ms)

    async def task_fire(
        self,
        task: str,
        expected: int | None,
        occurrences: Sequence[int],
        requests: Sequence[EnqueueRequest],
    ) -> list[EnqueueResult] | None:
        async with guard(self._fixes):
            return await scheduler.task_fire(self._store, task, expected, occurrences[-1], requests)

    async def task_unfinished(self, task: str) -> list[int]:
        return []  # task_fire claims and enqueues in one script

    async def task_finished(self, task: str, occurrences: Sequence[int]) -> None:
        return None

    async def task_failure(self, task: str, failure: TaskFailure) -> None:
        async with guard(self._fixes):
            await scheduler.task_failure(self._store, task, failure)

    async def lead(self, name: str, holder: str, lease_ms: int) -> bool:
        async with guard(self._fixes):
            return await scheduler.lead(self._store, name, holder, lease_ms)

    # --- outbox -------------------------------------------------------------------------------

    async def outbox_stage(self, tx: Any, requests: Sequence[EnqueueRequest]) -> list[str]:
        return outbox.stage(self._store, tx, requests)

    async def outbox_claim(
        self, relay_id: str, token: str, limit: int, lease_ms: int
    ) -> list[OutboxRow]:
        async with guard(self._fixes):
            return await outbox.claim(self._store, token, limit, lease_ms)

    async def outbox_publish(self, token: str, rows: Sequence[OutboxRow]) -> list[EnqueueResult]:
        async with guard(self._fixes):
            return await outbox.publish(self._store, token, rows)

    async def outbox_waiting(self, limit: int) -> OutboxWaiting:
        async with guard(self._fixes):
            return await outbox.waiting(self._store, limit)

    async def outbox_forget_published(self, published_before: int, limit: int) -> int:
        async with guard(self._fixes):
            return await outbox.forget_published(self._store, published_before, limit)

    async def outbox_release(self, token: str, ids: Sequence[str]) -> None:
        async with guard(self._fixes):
            await outbox.release(self._store, token, ids)

    # --- history (engine.retention) -----------------------------------------------------------

    async def prune_counts(
        self, cutoffs: Cutoffs, tenant_id: str | None = None
    ) -> list[PruneCount]:
        async with guard(self._fixes):
            return await retention.prune_counts(self._store, cutoffs, tenant_id)

    async def prune(
        self, cutoffs: Cutoffs, limit: int, tenant_id: str | None = None
    ) -> list[PruneCount]:
        async with guard(self._fixes):
            return await retention.prune(self._store, cutoffs, limit, tenant_id)

    async def count_jobless_events(self, before: int) -> int:
        async with guard(self._fixes):
            return await jobless_events.count(self._store, before)

    async def forget_jobless_events(self, before: int, limit: int) -> int:
        async with guard(self._fixes):
            return await jobless_events.forget(self._store, before, limit)

    # --- published descriptors ----------------------------------------------------------------

    async def publish_descriptors(
        self, worker_id: str, descriptors: Sequence[JobDescriptor], now: int
    ) -> None:
        async with guard(self._fixes):
            await published.publish_descriptors(self._store, worker_id, descriptors, now)

    async def published_descriptors(self, name: str | None = None) -> list[JobDescriptor]:
        async with guard(self._fixes):
            return await published.published_descriptors(self._store, name)

    async def forget_descriptors(self, published_before: int) -> int:
        async with guard(self._fixes):
            return await published.forget_descriptors(self._store, published_before)

    # --- pauses (engine.pauses) ---------------------------------------------------------------

    async def pause(
        self, kind: PauseKind, name: str, actor: str | None, reason: str | None, now: int
    ) -> tuple[Pause, bool]:
        async with guard(self._fixes):
            return await pause_store.pause(self._store, kind, name, actor, reason, now)

    async def resume(self, kind: PauseKind, name: str) -> Pause | None:
        async with guard(self._fixes):
            return await pause_store.resume(self._store, kind, name)

    async def pauses(self) -> list[Pause]:
        async with guard(self._fixes):
            return await pause_store.pauses(self._store)

    # --- progress (engine.progress) -----------------------------------------------------------

    async def save_progress(self, job_id: str, token: str, progress: Progress) -> bool:
        async with guard(self._fixes):
            return await progress_store.save_progress(self._store, job_id, token, progress)

    # --- settled counts (engine.settled_counts) -----------------------------------------------

    async def settled_counts(
        self, since_ms: int, until_ms: int, *, tenant_id: str | None = None
    ) -> dict[str, SettledCount]:
        async with guard(self._fixes):
            return await settled.settled_counts(self._store, since_ms, until_ms, tenant_id)

    # --- inbound events (engine.inbound_events) -----------------------------------------------

    async def send_event(self, event: InboundEvent, now: int) -> int:
        async with guard(self._fixes):
            return await inbound_events.send_event(self._store, event, now)

    async def first_event(
        self,
        name: str,
        key: str,
        tenant_id: str | None,
        started_at: int,
        after: EventCursor | None,
    ) -> InboundEvent | None:
        async with guard(self._fixes):
            return await inbound_events.first_event(
                self._store, name, key, tenant_id, started_at, after
            )

    async def await_event(self, job_id: str, name: str, key: str, tenant_id: str | None) -> None:
        async with guard(self._fixes):
            await inbound_events.await_event(self._store, job_id, name, key, tenant_id)

    async def forget_waiter(self, job_id: str) -> None:
        async with guard(self._fixes):
            await inbound_events.forget_waiter(self._store, job_id)

    async def wake_waiter(self, job_id: str, now: int) -> bool:
        async with guard(self._fixes):
            return await inbound_events.wake_waiter(self._store, job_id, now)

    async def prune_events(self, now: int) -> int:
        async with guard(self._fixes):
            return await inbound_events.prune_events(self._store, now)

    # --- rate limits (engine.rate_limits) -----------------------------------------------------

    async def take_rates(
        self, takes: Sequence[RateTake], now: int, job_id: str | None = None, up_to: int = 1
    ) -> RateVerdict:
        async with guard(self._fixes):
            return await rate_limits.take_rates(self._store, takes, now, job_id, up_to)

    async def rate_states(self, limit: int, prefix: str = "") -> list[RateState]:
        async with guard(self._fixes):
            return await rate_limits.rate_states(self._store, limit, prefix)

    async def forget_idle_rates(self, tat_before: int, limit: int) -> int:
        async with guard(self._fixes):
            return await rate_limits.forget_idle_rates(self._store, tat_before, limit)

    async def rate_reservations(self, limit: int) -> list[RateReservation]:
        async with guard(self._fixes):
            return await rate_limits.rate_reservations(self._store, limit)

    # --- reruns (engine.reruns) ---------------------------------------------------------------

    async def rerun(
        self,
        job_id: str,
        tenant_id: str | None,
        from_step: str,
        include_cancelled: bool,
        actor: str | None,
        new_run_id: str,
    ) -> JobRecord:
        async with guard(self._fixes):
            return await reruns.rerun(
                self._store, job_id, tenant_id, from_step, include_cancelled, actor, new_run_id
            )

    async def run_steps(self, job_id: str, run_id: str, tenant_id: str | None) -> list[StepRecord]:
        async with guard(self._fixes):
            return await reruns.run_steps(self._store, job_id, run_id, tenant_id)
