"""The NATS JetStream driver: the capabilities of `Driver` over one KV bucket (nats-py).

Every method converts NATS and network failures into DRIVER_UNAVAILABLE and a full store into
STORAGE_FULL (connection.guard), and hands the work to the module that owns it. The bucket is
opened on first use (`migrate`, which the client calls first): bound if it exists, else created
with the URL's replicas and storage. A settle is held through both (connection.held_through).

Layout and guarantees, in one place:
- One KV bucket per namespace (keys.py). A job is one document (codec.py): record, lease
  token, steps of every run, events. Every transition is one compare-and-set on its revision,
  computed by engine.rules; a conflict retries the whole transition from a fresh server read.
- Dedupe (rules 2, 3) is a create-only index key per (name, tenant or '', key) holding the
  enqueue's intent (enqueue.py): 50 racing enqueues make one job.
- Ready work is ordered by a replica of the bucket (replica.py) that the server feeds through a
  KV watch: claims sync it to the stream's last sequence, sort the claimable live jobs by
  `rules.claim_rank` and take each by CAS. The same pushed updates wake idle workers and feed
  the change signal; nothing polls the server (a worker's wait still ends at its timeout).
  The cost: each process holds every stored job in memory (retention bounds it), and a claim,
  list or stats pays one stream-info round trip for its sync.
- Concurrency caps (slots.py), leadership leases and cron state (scheduler.py) are CAS-guarded
  keys shared by every process; a durable sleep is a `suspended` document with its `run_at`.
- Durability is JetStream's: file storage (the default) survives a server restart; with
  `?replicas=3` on a 3-node cluster a write is acknowledged once a quorum stored it, so losing
  one node loses no acknowledged write. What the outbox promises: outbox.py.
- Offers every optional capability: pauses, progress, reruns, inbound events, rate limits
  (rate_limits.py: one CAS-guarded document for all rate state), settled counts and change
  signals, and record bounds: what a value past the engine's bound needs of the server's
  max_payload (max_payload.py), so the engine's first refusal names it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, TypeVar

from engine import bounds
from engine.clock import MONOTONIC_CLOCK, Clock, ServerClock, agree, server_clock
from engine.drivers.base import AckWrite, RecordNeeds, RunPosition, StepWrite, StoreReport
from engine.drivers.closing import closable
from engine.drivers.holding import Holds, hold, settle_of
from engine.drivers.installed import StoreAbsent
from engine.drivers.nats import (
    claims,
    enqueue,
    inbound_events,
    jobless_events,
    keys,
    ledgers,
    max_payload,
    operator,
    outbox,
    presence,
    rate_limits,
    reads,
    retention,
    scheduler,
    server_time,
    settled,
    slots,
    steps,
    tombstones,
)
from engine.drivers.nats import descriptors as published
from engine.drivers.nats import pauses as pause_store
from engine.drivers.nats import progress as progress_store
from engine.drivers.nats import reruns as rerun_store
from engine.drivers.nats.connection import (
    SETTLE_ROOM,
    UNAVAILABLE,
    ConnectionLog,
    Fixes,
    close_client,
    guard,
    held_through,
    open_bucket,
    parse_nats_url,
)
from engine.drivers.nats.installed import bucket_absent
from engine.drivers.nats.outbox import NatsTransaction
from engine.drivers.nats.store import Store
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

logger = logging.getLogger(__name__)

T = TypeVar("T")

SCHEMA_VERSION = b"1"


@closable
class NatsDriver:
    kind = "nats"

    def __init__(
        self,
        url: str,
        *,
        clock: Clock,
        connect_timeout_s: float = 5.0,
        settle_retry_ms: int = 300_000,
        retry_clock: Clock = MONOTONIC_CLOCK,
    ) -> None:
        """`settle_retry_ms`: how long a settle (ack, nack, step write) is held and tried again
        while the server is away before it fails (its lease then hands the job on)."""
        # This machine's clock, read as the server reads its own (engine/clock.py).
        self.clock = clock = server_clock(clock, "nats")
        if isinstance(clock, ServerClock):
            clock.keep = self._agree
        self._clock_unread = False
        self._url = parse_nats_url(url)
        self._fixes = Fixes.of(url)
        self._timeout = connect_timeout_s
        # Up to a day: a settle held longer outlives any lease that waits for it.
        self._settle_retry_ms = bounds.whole("settle_retry_ms", settle_retry_ms, 0, 86_400_000)
        self._retry_clock = retry_clock
        self._holds = Holds()  # the settles held through an outage (let_go_of_held)
        self._closed = False  # set by close() (closing.closable)
        self._store: Store | None = None
        self._opening = asyncio.Lock()

    @property
    def bucket(self) -> str:
        return self._url.bucket

    async def _open(self) -> Store:
        if self._store is not None:
            return self._store
        async with self._opening:
            if self._store is None:
                async with guard(self._fixes):
                    log = ConnectionLog(servers=len(self._url.servers))
                    client, js, kv = await open_bucket(self._url, self._timeout, log)
                    store = Store.open(client, js, kv, self.clock, self._fixes, log)
                    await store.replica.start()
                self._store = store
        return self._store

    def transaction(self) -> NatsTransaction:
        """An application batch for `outbox_stage`; its rows are written by `commit()`."""
        assert self._store is not None, "migrate() first"
        return NatsTransaction(self._store)

    async def migrate(self) -> None:
        store = await self._open()
        async with guard(self._fixes):
            await store.write(keys.VERSION, SCHEMA_VERSION, 0)
            await self._keep_time(store)

    async def store_absent(self) -> StoreAbsent | None:
        async with guard(self._fixes):
            return await bucket_absent(self._url, self._fixes.url, self._timeout)

    async def server_report(self) -> StoreReport:
        # Imported here: the report's module is only needed by `mcp-jobs db report`.
        from engine.drivers.nats.report import server_report

        return await server_report(self._url, self._fixes.unavailable)

    async def close(self) -> None:
        store, self._store = self._store, None
        if store is None:
            return
        store.waker.notify()
        await store.replica.stop()
        async with guard(self._fixes):
            await close_client(store.client)

    # --- the job's one value (engine.drivers.base RecordBounds) ------------------------------

    def input_needs(self, request: EnqueueRequest) -> RecordNeeds | None:
        store = self._store
        return None if store is None else enqueue.input_needs(store, request, self.clock.now_ms())

    def output_needs(self, job_id: str, size: int) -> RecordNeeds | None:
        store = self._store
        if store is None:
            return None
        # This process's copy: it holds every write of the job's run, all made from here.
        held = store.replica.get(keys.job(job_id))
        held_bytes = 0 if held is None else len(held.raw)
        return max_payload.output_needs(held_bytes, size, SETTLE_ROOM, store.client.max_payload)

    def let_go_of_held(self) -> int:
        """Held settles stop waiting and fail at their next try (holding.py `Holds.let_go`),
        for a worker stopped twice: what they carried is left to the jobs' leases. Answers how
        many settles were held."""
        return self._holds.let_go()

    # --- jobs ---------------------------------------------------------------------------------

    async def enqueue(
        self, requests: Sequence[EnqueueRequest], *, now: int | None = None
    ) -> list[EnqueueResult]:
        store = await self._open()
        async with guard(self._fixes):
            at = self.clock.now_ms() if now is None else now
            return await enqueue.enqueue(store, requests, at)

    async def enqueue_parts(
        self, parts: Iterable[Sequence[EnqueueRequest]], *, now: int | None = None
    ) -> list[EnqueueResult]:
        # The batch is checked as a whole before anything is written: build every part first.
        return await self.enqueue([request for part in parts for request in part], now=now)

    async def claim(
        self,
        worker_id: str,
        limit: int,
        lease_ms: int,
        queues: Sequence[str] | None = None,
        excluding: ClaimExclusion | None = None,
    ) -> list[ClaimedJob]:
        store = await self._open()
        async with guard(self._fixes):
            await agree(self.clock)  # a lease is compared with the server's time
            return await claims.claim(store, worker_id, limit, lease_ms, queues, excluding)

    async def heartbeat(self, job_id: str, token: str, lease_ms: int) -> HeartbeatResult:
        store = await self._open()
        async with guard(self._fixes):
            return await claims.heartbeat(store, job_id, token, lease_ms)

    def _held(self, what: str, settle: Callable[[Store, bool], Awaitable[T]]) -> Awaitable[T]:
        """`settle(store, again)` (`what`, for the log) held through an outage; `again` from
        the second try on, when the try before may have landed with its reply lost."""
        tries = 0

        async def guarded() -> T:
            nonlocal tries
            tries += 1
            store = await self._open()
            async with guard(self._fixes):
                return await settle(store, tries > 1)

        return hold(
            guarded,
            within_ms=self._settle_retry_ms,
            clock=self._retry_clock,
            stopped=lambda: self._closed,
            driver=self.kind,
            what=what,
            holds=self._holds,
            passes=held_through,
        )

    async def ack_many(self, writes: Sequence[AckWrite]) -> list[JobsError | None]:
        what = settle_of("ack", [w.job_id for w in writes])
        return await self._held(what, lambda store, again: claims.ack_many(store, writes, again))

    async def nack(self, job_id: str, token: str, options: NackOptions) -> JobRecord:
        return await self._held(
            settle_of("nack", [job_id]),
            lambda store, again: claims.nack(store, job_id, token, options, again),
        )

    async def get(self, job_id: str, tenant_id: str | None = None) -> JobRecord:
        store = await self._open()
        async with guard(self._fixes):
            return await reads.get(store, job_id, tenant_id)

    async def list_jobs(self, filter: JobFilter) -> JobPage:
        store = await self._open()
        async with guard(self._fixes):
            return await reads.list_jobs(store, filter)

    async def load_trace(
        self, job_id: str, tenant_id: str | None = None, page: TraceQuery | None = None
    ) -> TracePage:
        store = await self._open()
        async with guard(self._fixes):
            return await reads.load_trace(store, job_id, tenant_id, page)

    async def stats(
        self, queues: Sequence[str] | None = None, *, tenant_id: str | None = None
    ) -> list[QueueStats]:
        store = await self._open()
        async with guard(self._fixes):
            return await reads.stats(store, queues, tenant_id)

    async def cancel(self, job_id: str, tenant_id: str | None, actor: str | None) -> JobRecord:
        store = await self._open()
        async with guard(self._fixes):
            return await operator.cancel(store, job_id, tenant_id, actor)

    async def retry(
        self, job_id: str, tenant_id: str | None, include_cancelled: bool, actor: str | None
    ) -> JobRecord:
        store = await self._open()
        async with guard(self._fixes):
            return await operator.retry(store, job_id, tenant_id, include_cancelled, actor)

    async def record_event(self, event: EventRecord) -> None:
        store = await self._open()
        async with guard(self._fixes):
            await operator.record_event(store, event)

    # --- steps --------------------------------------------------------------------------------

    async def load_steps(self, run_id: str) -> list[StepRecord]:
        store = await self._open()
        async with guard(self._fixes):
            return await steps.load_steps(store, run_id)

    async def save_steps_many(self, writes: Sequence[StepWrite]) -> list[JobsError | None]:
        # A step written twice is the same record: no `again` needed.
        what = settle_of("step write", [w.job_id for w in writes])
        return await self._held(what, lambda store, _: steps.save_steps_many(store, writes))

    # --- limiter slots ------------------------------------------------------------------------

    async def acquire_slots(
        self, job_id: str, caps: Sequence[tuple[str, int]], expires_at: int
    ) -> str | None:
        store = await self._open()
        async with guard(self._fixes):
            return await slots.acquire_slots(store, job_id, caps, expires_at)

    async def release_slots(self, job_id: str) -> None:
        store = await self._open()
        async with guard(self._fixes):
            await slots.release_slots(store, job_id)

    # --- workers, wake-ups and change signals -------------------------------------------------

    async def worker_seen(self, info: WorkerInfo) -> None:
        store = await self._open()
        async with guard(self._fixes):
            await presence.worker_seen(store, info)
            await self._keep_time(store)

    async def _agree(self) -> None:
        """The `ServerClock`'s `keep`."""
        store = await self._open()
        async with guard(self._fixes):
            await self._keep_time(store)

    async def _keep_time(self, store: Store) -> None:
        """Measure the server's clock. It is read from a write, which a full store refuses:
        then the offset before stands (none: this machine's clock), and the call that measures
        goes on, so a full store can still be migrated, read and pruned."""
        clock = self.clock
        if not isinstance(clock, ServerClock):
            return
        try:
            await clock.measure(lambda: server_time.read_ms(store.js, store.kv))
        except UNAVAILABLE as exc:
            if not self._clock_unread:  # once until a measure gets through
                logger.warning("nats: the server's clock could not be read (%r)", exc)
            self._clock_unread = True
        else:
            self._clock_unread = False

    async def worker_gone(self, worker_id: str) -> None:
        store = await self._open()
        async with guard(self._fixes):
            await presence.worker_gone(store, worker_id)

    async def live_workers(self, seen_since: int) -> list[WorkerInfo]:
        store = await self._open()
        async with guard(self._fixes):
            return await presence.live_workers(store, seen_since)

    async def wait_for_work(self, timeout_ms: int) -> None:
        """Any process's write of a waiting job, as the server pushes it to the replica."""
        store = await self._open()
        await store.waker.wait(self.clock, timeout_ms)

    async def wait_for_change(self, seen: int, timeout_ms: int) -> int:
        """Any process's write of a job, backfill or descriptor, pushed by the server."""
        store = await self._open()
        return await store.changes.wait(seen, self.clock, timeout_ms)

    # --- backfill ledger ----------------------------------------------------------------------

    async def backfill_save(self, run: BackfillRun) -> None:
        store = await self._open()
        async with guard(self._fixes):
            await ledgers.backfill_save(store, run)

    async def backfill_runs(
        self,
        name: str | None = None,
        environment: str | None = None,
        *,
        status: BackfillStatus | None = None,
        before: RunPosition | None = None,
        limit: int | None = None,
    ) -> list[BackfillRun]:
        store = await self._open()
        async with guard(self._fixes):
            return await ledgers.backfill_runs(store, name, environment, status, before, limit)

    # --- scheduler and leader leases ----------------------------------------------------------

    async def task_state(self, task: str) -> TaskState | None:
        store = await self._open()
        async with guard(self._fixes):
            return await scheduler.task_state(store, task)

    async def task_claim(self, task: str, expected: int | None, occurrence_ms: int) -> bool:
        store = await self._open()
        async with guard(self._fixes):
            return await scheduler.task_claim(store, task, expected, occurrence_ms)

    async def task_fire(
        self,
        task: str,
        expected: int | None,
        occurrences: Sequence[int],
        requests: Sequence[EnqueueRequest],
    ) -> list[EnqueueResult] | None:
        store = await self._open()
        async with guard(self._fixes):
            return await scheduler.task_fire(store, task, expected, occurrences, requests)

    async def task_unfinished(self, task: str) -> list[int]:
        store = await self._open()
        async with guard(self._fixes):
            return await scheduler.task_unfinished(store, task)

    async def task_finished(self, task: str, occurrences: Sequence[int]) -> None:
        store = await self._open()
        async with guard(self._fixes):
            await scheduler.task_finished(store, task, occurrences)

    async def task_failure(self, task: str, failure: TaskFailure) -> None:
        store = await self._open()
        async with guard(self._fixes):
            await scheduler.task_failure(store, task, failure)

    async def lead(self, name: str, holder: str, lease_ms: int) -> bool:
        store = await self._open()
        async with guard(self._fixes):
            return await scheduler.lead(store, name, holder, lease_ms)

    # --- outbox -------------------------------------------------------------------------------

    async def outbox_stage(self, tx: Any, requests: Sequence[EnqueueRequest]) -> list[str]:
        store = await self._open()
        return outbox.stage(store, tx, requests)

    async def outbox_claim(
        self, relay_id: str, token: str, limit: int, lease_ms: int
    ) -> list[OutboxRow]:
        store = await self._open()
        async with guard(self._fixes):
            return await outbox.claim(store, token, limit, lease_ms)

    async def outbox_publish(self, token: str, rows: Sequence[OutboxRow]) -> list[EnqueueResult]:
        store = await self._open()
        async with guard(self._fixes):
            return await outbox.publish(store, token, rows)

    async def outbox_release(self, token: str, ids: Sequence[str]) -> None:
        store = await self._open()
        async with guard(self._fixes):
            await outbox.release(store, token, ids)

    async def outbox_waiting(self, limit: int) -> OutboxWaiting:
        store = await self._open()
        async with guard(self._fixes):
            return await outbox.waiting(store, limit)

    async def outbox_forget_published(self, published_before: int, limit: int) -> int:
        store = await self._open()
        async with guard(self._fixes):
            return await outbox.forget_published(store, published_before, limit)

    # --- history (engine.retention) -----------------------------------------------------------

    async def prune_counts(
        self, cutoffs: Cutoffs, tenant_id: str | None = None
    ) -> list[PruneCount]:
        store = await self._open()
        async with guard(self._fixes):
            return await retention.prune_counts(store, cutoffs, tenant_id)

    async def prune(
        self, cutoffs: Cutoffs, limit: int, tenant_id: str | None = None
    ) -> list[PruneCount]:
        store = await self._open()
        async with guard(self._fixes):
            return await retention.prune(store, cutoffs, limit, tenant_id)

    async def count_jobless_events(self, before: int) -> int:
        store = await self._open()
        async with guard(self._fixes):
            return await jobless_events.count(store, before)

    async def forget_jobless_events(self, before: int, limit: int) -> int:
        store = await self._open()
        async with guard(self._fixes):
            return await jobless_events.forget(store, before, limit)

    async def forget_tombstones(self, deleted_before: int, limit: int) -> int:
        store = await self._open()
        async with guard(self._fixes):
            return await tombstones.forget(store, deleted_before, limit)

    # --- published descriptors ----------------------------------------------------------------

    async def publish_descriptors(
        self, worker_id: str, descriptors: Sequence[JobDescriptor], now: int
    ) -> None:
        store = await self._open()
        async with guard(self._fixes):
            await published.publish_descriptors(store, worker_id, descriptors, now)

    async def published_descriptors(self, name: str | None = None) -> list[JobDescriptor]:
        store = await self._open()
        async with guard(self._fixes):
            return await published.published_descriptors(store, name)

    async def forget_descriptors(self, published_before: int) -> int:
        store = await self._open()
        async with guard(self._fixes):
            return await published.forget_descriptors(store, published_before)

    # --- pauses (engine.pauses) ---------------------------------------------------------------

    async def pause(
        self, kind: PauseKind, name: str, actor: str | None, reason: str | None, now: int
    ) -> tuple[Pause, bool]:
        store = await self._open()
        async with guard(self._fixes):
            return await pause_store.pause(store, kind, name, actor, reason, now)

    async def resume(self, kind: PauseKind, name: str) -> Pause | None:
        store = await self._open()
        async with guard(self._fixes):
            return await pause_store.resume(store, kind, name)

    async def pauses(self) -> list[Pause]:
        store = await self._open()
        async with guard(self._fixes):
            return await pause_store.pauses(store)

    # --- progress (engine.progress) -----------------------------------------------------------

    async def save_progress(self, job_id: str, token: str, progress: Progress) -> bool:
        store = await self._open()
        async with guard(self._fixes):
            return await progress_store.save_progress(store, job_id, token, progress)

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
        store = await self._open()
        async with guard(self._fixes):
            return await rerun_store.rerun(
                store, job_id, tenant_id, from_step, include_cancelled, actor, new_run_id
            )

    async def run_steps(self, job_id: str, run_id: str, tenant_id: str | None) -> list[StepRecord]:
        store = await self._open()
        async with guard(self._fixes):
            return await rerun_store.run_steps(store, job_id, run_id, tenant_id)

    # --- inbound events (engine.inbound_events) -----------------------------------------------

    async def send_event(self, event: InboundEvent, now: int) -> int:
        store = await self._open()
        async with guard(self._fixes):
            return await inbound_events.send_event(store, event, now)

    async def first_event(
        self,
        name: str,
        key: str,
        tenant_id: str | None,
        started_at: int,
        after: EventCursor | None,
    ) -> InboundEvent | None:
        store = await self._open()
        async with guard(self._fixes):
            return await inbound_events.first_event(store, name, key, tenant_id, started_at, after)

    async def await_event(self, job_id: str, name: str, key: str, tenant_id: str | None) -> None:
        store = await self._open()
        async with guard(self._fixes):
            await inbound_events.await_event(store, job_id, name, key, tenant_id)

    async def forget_waiter(self, job_id: str) -> None:
        store = await self._open()
        async with guard(self._fixes):
            await inbound_events.forget_waiter(store, job_id)

    async def wake_waiter(self, job_id: str, now: int) -> bool:
        store = await self._open()
        async with guard(self._fixes):
            return await inbound_events.wake_waiter(store, job_id, now)

    async def prune_events(self, now: int) -> int:
        store = await self._open()
        async with guard(self._fixes):
            return await inbound_events.prune_events(store, now)

    # --- rate limits (engine.rate_limits) -----------------------------------------------------

    async def take_rates(
        self, takes: Sequence[RateTake], now: int, job_id: str | None = None, up_to: int = 1
    ) -> RateVerdict:
        store = await self._open()
        async with guard(self._fixes):
            return await rate_limits.take_rates(store, takes, now, job_id, up_to)

    async def rate_states(self, limit: int, prefix: str = "") -> list[RateState]:
        store = await self._open()
        async with guard(self._fixes):
            return await rate_limits.rate_states(store, limit, prefix)

    async def forget_idle_rates(self, tat_before: int, limit: int) -> int:
        store = await self._open()
        async with guard(self._fixes):
            return await rate_limits.forget_idle_rates(store, tat_before, limit)

    async def rate_reservations(self, limit: int) -> list[RateReservation]:
        store = await self._open()
        async with guard(self._fixes):
            return await rate_limits.rate_reservations(store, limit)

    # --- settled counts (engine.settled_counts) -----------------------------------------------

    async def settled_counts(
        self, since_ms: int, until_ms: int, *, tenant_id: str | None = None
    ) -> dict[str, SettledCount]:
        store = await self._open()
        async with guard(self._fixes):
            return await settled.settled_counts(store, since_ms, until_ms, tenant_id)
