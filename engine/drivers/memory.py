"""The in-memory driver: the whole Protocol over dicts, for tests and for trying things out.

It implements the job-level Protocol directly — it never sees SQL — and takes every transition
from engine.rules, as the SQL drivers do; the parity suite proves they agree. One event loop
owns it; a method with no `await` between its read and its write is atomic, which is what makes
claims and fences hold.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from engine import paging
from engine.changes import ChangeFeed
from engine.clock import Clock
from engine.descriptors import stamped
from engine.drivers.base import AckWrite, RunPosition, StepWrite, StoreReport
from engine.drivers.closing import closable
from engine.drivers.memory_controls import MemoryControls
from engine.errors import (
    JobDuplicateError,
    JobNotCancellableError,
    JobNotFoundError,
    JobNotRetryableError,
    JobsError,
    JobSlotLostError,
)
from engine.ids import new_ids, new_token
from engine.lease_expiry import lease_expired_event
from engine.outbox_errors import OutboxNoTxError, OutboxTxKindError
from engine.pauses import is_held
from engine.presence import EXPIRED_PER_BEAT, is_expired
from engine.retention import Cutoffs, PruneCount
from engine.rules import (
    LIVE_STATES,
    DedupeKey,
    ack_transition,
    apply_nack,
    can_cancel,
    can_retry,
    cancel_event_data,
    cancel_transition,
    claim_rank,
    claim_transition,
    dedupe_key,
    event_kind_for,
    is_claimable,
    is_excluded,
    nack_event_data,
    new_record,
    queue_stats,
    retry_event_data,
    retry_transition,
)
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
from schemas.scheduler import LeaderLease, TaskFailure, TaskState
from schemas.states import BackfillStatus, JobState
from schemas.stats import QueueStats, WorkerInfo
from schemas.steps import StepRecord
from schemas.trace import TracePage, TraceQuery

# How to stage through this driver: the fix of a value that is no transaction, or none open.
MEMORY_STAGE_LINE = (
    "tx = jobs.driver.transaction(); await jobs.stage(tx, name, input); jobs.driver.commit(tx)"
)


@dataclass
class MemoryTransaction:
    """The memory driver's stand-in for an application transaction, for the outbox."""

    staged: list[OutboxRow] = field(default_factory=list[OutboxRow])
    open: bool = True


@dataclass
class _Lease:
    token: str
    expires_at: int


@closable
class MemoryDriver(MemoryControls):
    kind = "memory"

    def __init__(self, clock: Clock) -> None:
        super().__init__()
        self.clock = clock
        self._jobs: dict[str, JobRecord] = {}
        self._leases: dict[str, _Lease] = {}
        self._live: dict[DedupeKey, str] = {}
        self._steps: dict[str, dict[str, StepRecord]] = {}
        # Keyed by a sequence that never repeats: a trace cursor stays valid across a prune.
        self._events: dict[int, EventRecord] = {}
        self._event_seq = itertools.count()
        self._slots: dict[str, dict[str, int]] = {}  # key -> job_id -> expires_at
        self._workers: dict[str, WorkerInfo] = {}
        self._backfills: dict[str, BackfillRun] = {}
        self._tasks: dict[str, TaskState] = {}
        self._outbox: dict[str, OutboxRow] = {}
        self._leaders: dict[str, LeaderLease] = {}
        self._descriptors: dict[str, JobDescriptor] = {}  # by job name: the last one published
        self._waker = Waker()
        self.changes = ChangeFeed()  # every write below that a reader may follow bumps it

    async def migrate(self) -> None:
        return None

    async def server_report(self) -> StoreReport:
        return StoreReport(True, ["memory: this process's own store; nothing outlives it"])

    async def close(self) -> None:
        self._waker.notify()

    # --- jobs ---------------------------------------------------------------------------------

    async def enqueue_parts(
        self, parts: Iterable[Sequence[EnqueueRequest]], *, now: int | None = None
    ) -> list[EnqueueResult]:
        # Nothing to overlap in memory: the parts are built, then written in one step.
        return await self.enqueue([request for part in parts for request in part], now=now)

    async def enqueue(
        self, requests: Sequence[EnqueueRequest], *, now: int | None = None
    ) -> list[EnqueueResult]:
        if now is None:
            now = self.clock.now_ms()
        planned: dict[DedupeKey, EnqueueRequest] = {}
        results: list[EnqueueResult] = []
        for request in requests:
            key = dedupe_key(request.name, request.tenant_id, request.idempotency_key)
            holder_id = self._live.get(key)
            if holder_id is not None:
                holder = self._jobs[holder_id]
                if request.on_conflict == "error":
                    raise JobDuplicateError(
                        request.name, request.idempotency_key, holder.id, request.tenant_id
                    )
                results.append(
                    EnqueueResult(
                        id=holder.id, run_id=holder.run_id, deduped=True, state=holder.state
                    )
                )
                continue
            earlier = planned.get(key)
            if earlier is not None:
                if request.on_conflict == "error":
                    raise JobDuplicateError(
                        request.name, request.idempotency_key, earlier.id, request.tenant_id
                    )
                state = earlier.initial_state(now)
                results.append(
                    EnqueueResult(id=earlier.id, run_id=earlier.run_id, deduped=True, state=state)
                )
                continue
            planned[key] = request
            state = request.initial_state(now)
            results.append(
                EnqueueResult(id=request.id, run_id=request.run_id, deduped=False, state=state)
            )
        for key, request in planned.items():
            self._jobs[request.id] = new_record(request, now)
            self._live[key] = request.id
        if planned:
            self._waker.notify()
            self.changes.notify()
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
        wanted = set(queues) if queues is not None else None
        candidates = [
            job
            for job in self._jobs.values()
            if (wanted is None or job.queue in wanted)
            and is_claimable(job, now)
            and not (self._pauses and is_held(job, self._pauses))
            and not is_excluded(job, excluding)
        ]
        candidates.sort(key=claim_rank)
        claimed: list[ClaimedJob] = []
        for job in candidates[: max(0, limit)]:
            token = new_token()
            record = claim_transition(job, worker_id, now, lease_ms)
            expires = now + lease_ms
            lost = lease_expired_event(job, worker_id, now)
            if lost is not None:
                self._events[next(self._event_seq)] = lost
            self._jobs[job.id] = record
            self._leases[job.id] = _Lease(token, expires)
            # As every driver: past its first attempt (or with steps stored) a run reads its steps.
            has_steps = record.attempt > 1 or bool(self._steps.get(record.run_id))
            claimed.append(
                ClaimedJob(
                    record=record, token=token, lease_expires_at=expires, has_steps=has_steps
                )
            )
        if claimed:
            self.changes.notify()
        return claimed

    def _held(self, job_id: str, token: str, *, running: bool = True) -> JobRecord:
        job = self._jobs.get(job_id)
        lease = self._leases.get(job_id)
        if job is None or lease is None or lease.token != token:
            raise JobSlotLostError(job_id)
        if running and job.state != "running":
            raise JobSlotLostError(job_id)
        return job

    async def heartbeat(self, job_id: str, token: str, lease_ms: int) -> HeartbeatResult:
        job = self._held(job_id, token, running=False)
        if job.state == "cancelled":
            return HeartbeatResult(
                lease_expires_at=job.lease_expires_at or 0, cancel_requested=True
            )
        if job.state != "running":
            raise JobSlotLostError(job_id)
        now = self.clock.now_ms()
        expires = now + lease_ms
        self._leases[job_id].expires_at = expires
        self._jobs[job_id] = job.model_copy(update={"lease_expires_at": expires})
        for holders in self._slots.values():
            if job_id in holders:
                holders[job_id] = expires
        return HeartbeatResult(lease_expires_at=expires, cancel_requested=False)

    async def ack_many(self, writes: Sequence[AckWrite]) -> list[JobsError | None]:
        now = self.clock.now_ms()
        outcomes: list[JobsError | None] = []
        for write in writes:
            try:
                job = self._held(write.job_id, write.token)
            except JobsError as exc:
                outcomes.append(exc)
                continue
            self._handed_back(ack_transition(job, now, write.output))
            outcomes.append(None)
        if any(outcome is None for outcome in outcomes):
            self.changes.notify()
        return outcomes

    async def nack(self, job_id: str, token: str, options: NackOptions) -> JobRecord:
        job = self._held(job_id, token)
        now = self.clock.now_ms()
        record = apply_nack(job, options, now)
        self._handed_back(record)
        kind = event_kind_for(options)
        if kind is not None:
            self._event(job, kind, now, nack_event_data(options, job.attempt, record.run_at))
        if record.state in LIVE_STATES:
            self._waker.notify()
        self.changes.notify()
        return record

    def _handed_back(self, record: JobRecord) -> None:
        """Store a record its holder let go of: no lease, no slots, and its key free again
        unless it is still live."""
        self._jobs[record.id] = record
        self._leases.pop(record.id, None)
        self._drop_slots({record.id})
        if record.state not in LIVE_STATES:
            key = dedupe_key(record.name, record.tenant_id, record.idempotency_key)
            self._live.pop(key, None)

    def _event(
        self,
        job: JobRecord,
        kind: str,
        now: int,
        data: dict[str, Any] | None,
        actor: str | None = None,
    ) -> None:
        self._events[next(self._event_seq)] = EventRecord(
            job_id=job.id, at=now, kind=kind, actor=actor, tenant_id=job.tenant_id, data=data
        )

    def _find(self, job_id: str, tenant_id: str | None) -> JobRecord:
        job = self._jobs.get(job_id)
        if job is None or (tenant_id is not None and job.tenant_id != tenant_id):
            raise JobNotFoundError(job_id, tenant_id)
        return job

    async def get(self, job_id: str, tenant_id: str | None = None) -> JobRecord:
        return self._find(job_id, tenant_id)

    async def list_jobs(self, filter: JobFilter) -> JobPage:
        return paging.page_of(self._jobs.values(), filter)

    async def load_trace(
        self, job_id: str, tenant_id: str | None = None, page: TraceQuery | None = None
    ) -> TracePage:
        job = self._find(job_id, tenant_id)
        page = page or TraceQuery()
        # Start order; the position in the run's dict (first-save order) breaks ties.
        steps = sorted(
            (
                (step.started_at, pos, step)
                for pos, step in enumerate(self._steps.get(job.run_id, {}).values())
            ),
            key=lambda t: (t[0], t[1]),
        )
        before_steps = (
            steps
            if page.steps_cursor is None
            else [
                t
                for t in steps
                if (t[0], t[1]) < paging.parse_step_cursor(page.steps_cursor, job_id)
            ]
        )
        step_page = before_steps[-page.steps_limit :]
        events = [(seq, e) for seq, e in self._events.items() if e.job_id == job_id]
        before_events = (
            events
            if page.events_cursor is None
            else [t for t in events if t[0] < paging.parse_event_cursor(page.events_cursor, job_id)]
        )
        event_page = before_events[-page.events_limit :]
        more_steps = len(before_steps) > len(step_page)
        more_events = len(before_events) > len(event_page)
        return TracePage(
            job=job,
            steps=[t[2] for t in step_page],
            events=[e for _, e in event_page],
            steps_total=len(steps),
            events_total=len(events),
            steps_cursor=paging.step_cursor(job_id, *step_page[0][:2]) if more_steps else None,
            events_cursor=paging.event_cursor(job_id, event_page[0][0]) if more_events else None,
        )

    async def stats(
        self, queues: Sequence[str] | None = None, *, tenant_id: str | None = None
    ) -> list[QueueStats]:
        return queue_stats(
            self._jobs.values(), self.clock.now_ms(), queues=queues, tenant_id=tenant_id
        )

    async def cancel(self, job_id: str, tenant_id: str | None, actor: str | None) -> JobRecord:
        job = self._find(job_id, tenant_id)
        if not can_cancel(job.state):
            raise JobNotCancellableError(job_id, job.state)
        now = self.clock.now_ms()
        record = cancel_transition(job, now)
        self._jobs[job_id] = record
        if not record.cancel_requested:
            self._leases.pop(job_id, None)  # a running holder keeps its lease to hear the cancel
        self._live.pop(dedupe_key(job.name, job.tenant_id, job.idempotency_key), None)
        self._event(job, "cancelled", now, cancel_event_data(job.state), actor)
        self.changes.notify()
        return record

    async def retry(
        self, job_id: str, tenant_id: str | None, include_cancelled: bool, actor: str | None
    ) -> JobRecord:
        job = self._find(job_id, tenant_id)
        if not can_retry(job.state, include_cancelled):
            raise JobNotRetryableError(job_id, job.state)
        key = dedupe_key(job.name, job.tenant_id, job.idempotency_key)
        holder = self._live.get(key)
        if holder is not None and holder != job_id:  # a delayed job holds its own key
            raise JobDuplicateError(job.name, job.idempotency_key, holder, job.tenant_id)
        now = self.clock.now_ms()
        record = retry_transition(job, now)
        self._jobs[job_id] = record
        self._leases.pop(job_id, None)
        self._live[key] = job_id
        self._event(job, "requeued", now, retry_event_data(job.state), actor)
        self._waker.notify()
        self.changes.notify()
        return record

    async def record_event(self, event: EventRecord) -> None:
        self._events[next(self._event_seq)] = event

    # --- steps --------------------------------------------------------------------------------

    async def load_steps(self, run_id: str) -> list[StepRecord]:
        return sorted(self._steps.get(run_id, {}).values(), key=lambda s: s.started_at)

    async def save_steps_many(self, writes: Sequence[StepWrite]) -> list[JobsError | None]:
        outcomes: list[JobsError | None] = []
        for write in writes:
            try:
                self._held(write.job_id, write.token)
            except JobsError as exc:
                outcomes.append(exc)
                continue
            self._steps.setdefault(write.step.run_id, {})[write.step.name] = write.step
            outcomes.append(None)
        if any(outcome is None for outcome in outcomes):
            self.changes.notify()
        return outcomes

    # --- limiter slots ------------------------------------------------------------------------

    async def acquire_slots(
        self, job_id: str, caps: Sequence[tuple[str, int]], expires_at: int
    ) -> str | None:
        now = self.clock.now_ms()
        for key, cap in caps:
            holders = self._slots.get(key, {})
            taken = sum(1 for j, exp in holders.items() if exp > now and j != job_id)
            if taken >= cap:
                return key
        for key, _ in caps:
            self._slots.setdefault(key, {})[job_id] = expires_at
        return None

    async def release_slots(self, job_id: str) -> None:
        self._drop_slots({job_id})

    def _drop_slots(self, job_ids: set[str]) -> None:
        """The jobs' slots freed; a key no job holds goes, so the walks over the keys (every
        heartbeat, settle and release) cost the keys held now, not every key ever computed."""
        for key in list(self._slots):
            holders = self._slots[key]
            for job_id in job_ids & holders.keys():
                del holders[job_id]
            if not holders:
                del self._slots[key]

    # --- workers ------------------------------------------------------------------------------

    async def worker_seen(self, info: WorkerInfo) -> None:
        now = self.clock.now_ms()
        expired = [
            worker_id
            for worker_id, seen in self._workers.items()
            if worker_id != info.id and is_expired(seen.last_seen_at, now)
        ]
        for worker_id in expired[:EXPIRED_PER_BEAT]:
            del self._workers[worker_id]
        self._workers[info.id] = info

    async def worker_gone(self, worker_id: str) -> None:
        self._workers.pop(worker_id, None)

    async def live_workers(self, seen_since: int) -> list[WorkerInfo]:
        return [w for w in self._workers.values() if w.last_seen_at >= seen_since]

    async def wait_for_work(self, timeout_ms: int) -> None:
        await self._waker.wait(self.clock, timeout_ms)

    async def wait_for_change(self, seen: int, timeout_ms: int) -> int:
        return await self.changes.wait(seen, self.clock, timeout_ms)

    # --- backfill ledger ----------------------------------------------------------------------

    async def backfill_save(self, run: BackfillRun) -> None:
        self._backfills[run.run_id] = run
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
        runs = [
            r
            for r in self._backfills.values()
            if (name is None or r.name == name)
            and (environment is None or r.environment == environment)
            and (status is None or r.status == status)
            and (before is None or (r.started_at, r.run_id) < before)
        ]
        runs.sort(key=lambda r: (r.started_at, r.run_id), reverse=True)
        return runs if limit is None else runs[:limit]

    # --- scheduler ----------------------------------------------------------------------------

    async def task_state(self, task: str) -> TaskState | None:
        return self._tasks.get(task)

    async def task_claim(self, task: str, expected: int | None, occurrence_ms: int) -> bool:
        current = self._tasks.get(task)
        if (current.last_fired_at if current is not None else None) != expected:
            return False
        now = self.clock.now_ms()
        self._tasks[task] = TaskState(task=task, last_fired_at=occurrence_ms, updated_at=now)
        return True

    async def task_fire(
        self,
        task: str,
        expected: int | None,
        occurrences: Sequence[int],
        requests: Sequence[EnqueueRequest],
    ) -> list[EnqueueResult] | None:
        current = self._tasks.get(task)
        if (current.last_fired_at if current is not None else None) != expected:
            return None
        # Nothing awaits in between: the claim is made only once the jobs are in.
        results = await self.enqueue(requests) if requests else []
        now = self.clock.now_ms()
        self._tasks[task] = TaskState(task=task, last_fired_at=occurrences[-1], updated_at=now)
        return results

    async def task_unfinished(self, task: str) -> list[int]:
        return []  # task_fire claims and enqueues as one step

    async def task_finished(self, task: str, occurrences: Sequence[int]) -> None:
        return None

    async def task_failure(self, task: str, failure: TaskFailure) -> None:
        current = self._tasks.get(task)
        last = current.last_fired_at if current is not None else None
        now = self.clock.now_ms()
        state = TaskState(task=task, last_fired_at=last, updated_at=now, failure=failure)
        self._tasks[task] = state

    # --- outbox -------------------------------------------------------------------------------

    def transaction(self) -> MemoryTransaction:
        return MemoryTransaction()

    def commit(self, tx: MemoryTransaction) -> None:
        tx.open = False
        for row in tx.staged:
            self._outbox[row.id] = row
        tx.staged.clear()

    def rollback(self, tx: MemoryTransaction) -> None:
        tx.open = False
        tx.staged.clear()

    async def outbox_stage(self, tx: Any, requests: Sequence[EnqueueRequest]) -> list[str]:
        if not isinstance(tx, MemoryTransaction):
            raise OutboxTxKindError(
                self.kind,
                tx,
                "a MemoryTransaction from `jobs.driver.transaction()`",
                MEMORY_STAGE_LINE,
            )
        if not tx.open:
            raise OutboxNoTxError(self.kind, MEMORY_STAGE_LINE)
        now = self.clock.now_ms()
        ids: list[str] = []
        for request, row_id in zip(requests, new_ids(len(requests), now), strict=True):
            row = OutboxRow(id=row_id, staged_at=now, request=request)
            tx.staged.append(row)
            ids.append(row.id)
        return ids

    async def outbox_claim(
        self, relay_id: str, token: str, limit: int, lease_ms: int
    ) -> list[OutboxRow]:
        now = self.clock.now_ms()
        free = [
            r
            for r in self._outbox.values()
            if r.published_at is None and (r.claim_expires_at is None or r.claim_expires_at <= now)
        ]
        free.sort(key=lambda r: (r.staged_at, r.id))
        taken: list[OutboxRow] = []
        for row in free[:limit]:
            claimed = row.model_copy(
                update={"claimed_by": token, "claim_expires_at": now + lease_ms}
            )
            self._outbox[row.id] = claimed
            taken.append(claimed)
        return taken

    async def outbox_publish(self, token: str, rows: Sequence[OutboxRow]) -> list[EnqueueResult]:
        owned = [
            self._outbox[r.id]
            for r in rows
            if r.id in self._outbox
            and self._outbox[r.id].claimed_by == token
            and self._outbox[r.id].published_at is None
        ]
        if not owned:
            return []
        results = await self.enqueue([r.request for r in owned])
        now = self.clock.now_ms()
        for row, result in zip(owned, results, strict=True):
            self._outbox[row.id] = row.model_copy(update={"published_at": now, "job_id": result.id})
        return results

    async def outbox_release(self, token: str, ids: Sequence[str]) -> None:
        for row_id in ids:
            row = self._outbox.get(row_id)
            if row is not None and row.claimed_by == token and row.published_at is None:
                self._outbox[row_id] = row.model_copy(
                    update={"claimed_by": None, "claim_expires_at": None}
                )

    async def outbox_waiting(self, limit: int) -> OutboxWaiting:
        waiting = [r.staged_at for r in self._outbox.values() if r.published_at is None]
        return OutboxWaiting(
            count=min(len(waiting), limit), oldest_staged_at=min(waiting, default=None)
        )

    async def outbox_forget_published(self, published_before: int, limit: int) -> int:
        done = sorted(
            (row.published_at, row.id)
            for row in self._outbox.values()
            if row.published_at is not None and row.published_at < published_before
        )[:limit]
        for _, row_id in done:
            del self._outbox[row_id]
        return len(done)

    # --- history (engine.retention) -----------------------------------------------------------

    def _expired(self, cutoffs: Cutoffs, tenant_id: str | None) -> list[JobRecord]:
        found = [
            job
            for job in self._jobs.values()
            if job.state not in LIVE_STATES
            and (tenant_id is None or job.tenant_id == tenant_id)
            and cutoffs.expired(job.name, job.state, job.finished_at)
        ]
        found.sort(key=lambda j: (j.finished_at or 0, j.id))
        return found

    async def prune_counts(
        self, cutoffs: Cutoffs, tenant_id: str | None = None
    ) -> list[PruneCount]:
        return _counted(self._expired(cutoffs, tenant_id))

    async def prune(
        self, cutoffs: Cutoffs, limit: int, tenant_id: str | None = None
    ) -> list[PruneCount]:
        doomed = self._expired(cutoffs, tenant_id)[: max(0, limit)]
        ids = {job.id for job in doomed}
        for job in doomed:
            del self._jobs[job.id]
            self._steps.pop(job.run_id, None)
            self._leases.pop(job.id, None)
        if ids:
            # The runs a rerun left behind (engine/reruns.py) go with their job.
            for run_id in [r for r, steps in self._steps.items() if _owned_by(steps, ids)]:
                del self._steps[run_id]
            self._events = {s: e for s, e in self._events.items() if e.job_id not in ids}
            self._drop_slots(ids)
            self.changes.notify()
        return _counted(doomed)

    def _jobless_before(self, before: int) -> list[tuple[int, int]]:
        """(at, seq) of the events of no job recorded before `before`, oldest first."""
        events = self._events.items()
        return sorted((e.at, s) for s, e in events if e.job_id is None and e.at < before)

    async def count_jobless_events(self, before: int) -> int:
        return len(self._jobless_before(before))

    async def forget_jobless_events(self, before: int, limit: int) -> int:
        doomed = self._jobless_before(before)[: max(0, limit)]
        for _, seq in doomed:
            del self._events[seq]
        return len(doomed)

    async def lead(self, name: str, holder: str, lease_ms: int) -> bool:
        now = self.clock.now_ms()
        lease = self._leaders.get(name)
        if lease is None or lease.holder == holder or lease.expires_at <= now:
            self._leaders[name] = LeaderLease(holder=holder, expires_at=now + lease_ms)
            return True
        return False

    # --- published descriptors (engine.descriptors) -------------------------------------------

    async def publish_descriptors(
        self, worker_id: str, descriptors: Sequence[JobDescriptor], now: int
    ) -> None:
        for descriptor in descriptors:
            self._descriptors[descriptor.name] = stamped(descriptor, worker_id, now)
        self.changes.notify()

    async def published_descriptors(self, name: str | None = None) -> list[JobDescriptor]:
        if name is not None:
            found = self._descriptors.get(name)
            return [] if found is None else [found]
        return [self._descriptors[n] for n in sorted(self._descriptors)]

    async def forget_descriptors(self, published_before: int) -> int:
        old = [
            name
            for name, d in self._descriptors.items()
            if (d.published_at or 0) < published_before
        ]
        for name in old:
            del self._descriptors[name]
        if old:
            self.changes.notify()
        return len(old)


def _owned_by(steps: dict[str, StepRecord], job_ids: set[str]) -> bool:
    return any(step.job_id in job_ids for step in steps.values())


def _counted(jobs: Iterable[JobRecord]) -> list[PruneCount]:
    counts: dict[tuple[JobState, str], int] = {}
    for job in jobs:
        key = (job.state, job.queue)
        counts[key] = counts.get(key, 0) + 1
    return [PruneCount(state, queue, n) for (state, queue), n in sorted(counts.items())]
