"""The driver Protocol, split by capability: job-level operations over `schemas` models.

A driver never exposes SQL (or any storage shape) to its callers. Every method takes and returns
models; times are epoch ms read from the driver's injected clock. Each capability is a small
Protocol (`JobStore` is the core every driver has); `Driver` is their union. A driver offers a
capability by implementing its methods; the engine asks with `require(driver, OUTBOX)` and gets
DRIVER_CAPABILITY_MISSING instead of an AttributeError mid-run. The conformance kit in
`engine/testing/` is the executable half of this contract.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, NamedTuple, Protocol, TypeVar, cast, runtime_checkable

from engine.clock import Clock
from engine.driver_errors import DriverCapabilityMissingError
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


class AckWrite(NamedTuple):
    """One job to settle as done by `ack_many`: fenced by `token`, storing `output`."""

    job_id: str
    token: str
    output: Any


class RunPosition(NamedTuple):
    """Where a ledger row sits in newest-first order: `backfill_runs(before=...)` answers the
    rows strictly older, (started_at, run_id) descending."""

    started_at: int
    run_id: str


class StepWrite(NamedTuple):
    """One step record to upsert by `save_steps_many`, fenced by `token`."""

    job_id: str
    token: str
    step: StepRecord


@runtime_checkable
class JobStore(Protocol):
    """The core every driver offers: jobs, their lifecycle, events, and the schema."""

    kind: str  # the driver's name: "memory", "sqlite", "postgres" or a plug-in's
    clock: Clock

    async def migrate(self) -> None:
        """Create or upgrade every durable table. Idempotent and safe to run concurrently."""
        ...

    async def close(self) -> None: ...

    async def enqueue(
        self, requests: Sequence[EnqueueRequest], *, now: int | None = None
    ) -> list[EnqueueResult]:
        """Insert jobs atomically, one result per request, in order. `now`: the instant the
        caller resolved `run_at` against (else the driver's clock); the rows are created at it.

        Dedupe (rules 2, 3): a request whose `(name, tenant_id or '', idempotency_key)` is held by
        a LIVE row (or by an earlier item of this batch) inserts nothing and answers that row's
        id with `deduped=True`. If such a request has `on_conflict='error'`, raise
        `JobDuplicateError` and insert nothing at all. `run_at` later than now → state `delayed`.
        """
        ...

    async def enqueue_parts(
        self, parts: Iterable[Sequence[EnqueueRequest]], *, now: int | None = None
    ) -> list[EnqueueResult]:
        """`enqueue` of the concatenated parts, as one atomic batch, at `now` as in `enqueue`.
        Parts are built lazily by the caller, and building one may raise: then nothing is
        written and that error comes out unchanged. A driver that writes over the network
        inserts each part while the caller builds the next; one that does not may build them
        all first."""
        ...

    async def claim(
        self,
        worker_id: str,
        limit: int,
        lease_ms: int,
        queues: Sequence[str] | None = None,
        excluding: ClaimExclusion | None = None,
    ) -> list[ClaimedJob]:
        """Take up to `limit` due jobs in `rules.claim_rank` order and lease them to `worker_id`.

        Claimable: state ready/delayed/suspended with `run_at <= now`, or running with an expired
        lease (rule 13). Never cancelled or any settled state, nor a paused queue's or name's
        job, nor one `rules.is_excluded` by `excluding` (the caps its worker found full, passed
        by keyword and only then): the claim walks past those to the jobs after them. Sets state
        running, a fresh token, `lease_expires_at = now + lease_ms`, and increments `attempt`.
        """
        ...

    async def heartbeat(self, job_id: str, token: str, lease_ms: int) -> HeartbeatResult:
        """Extend the lease (and the job's limiter slots). `JobSlotLostError` if the token no
        longer holds the job; `cancel_requested=True` if an operator cancelled it."""
        ...

    async def ack_many(self, writes: Sequence[AckWrite]) -> list[JobsError | None]:
        """Settle each job as done, store its `output`, release its lease and slots, clear
        `last_error`. Fenced by token. One outcome per item, in order: None when written, else
        that item's own error (`JobSlotLostError` when its token no longer holds the job;
        `JobOutputInvalidError`/`InvalidArgumentError` when the database refused its value).
        One item's failure never settles or fails another. Raises only for a failure of the
        whole call (`DriverUnavailableError`). No two items share a `job_id`."""
        ...

    async def nack(self, job_id: str, token: str, options: NackOptions) -> JobRecord:
        """Hand a claimed job back (retry, park, shed, dead letter, fail). Fenced by token.

        State: dead_letter → dead; fail → failed; park → suspended; otherwise ready (delay 0 or
        a shed) or delayed (a retry with a delay). `counts_as_attempt=False` gives the attempt
        back. A shed keeps `queued_at`; everything else that requeues sets it to the new
        `run_at`. `error`, when given, becomes `last_error` (a shed passes none).
        """
        ...

    async def get(self, job_id: str, tenant_id: str | None = None) -> JobRecord:
        """`JobNotFoundError` when absent, or when `tenant_id` is given and differs (rule 4)."""
        ...

    async def list_jobs(self, filter: JobFilter) -> JobPage:
        """Newest first (id descending); `next_cursor` is the last id when more may follow."""
        ...

    async def load_trace(
        self, job_id: str, tenant_id: str | None = None, page: TraceQuery | None = None
    ) -> TracePage:
        """The record and one page of its history: the newest `steps_limit` of its run's steps
        before `steps_cursor` (in start order; ties keep first-save order), the newest
        `events_limit` of its events before `events_cursor` (oldest first), both totals, and a
        cursor for each when older ones remain (`engine.paging` encodes them). No `page`: the
        defaults. Costs the page and the totals, never the whole history."""
        ...

    async def stats(
        self, queues: Sequence[str] | None = None, *, tenant_id: str | None = None
    ) -> list[QueueStats]:
        """Per queue, following rule 7. Queues with no rows at all are omitted. With
        `tenant_id`, only that tenant's jobs count (a tenant-pinned server's view)."""
        ...

    async def cancel(self, job_id: str, tenant_id: str | None, actor: str | None) -> JobRecord:
        """Live → cancelled (terminal). A running job keeps its token so the holder's next
        heartbeat sees `cancel_requested`. `JobNotCancellableError` when settled."""
        ...

    async def retry(
        self, job_id: str, tenant_id: str | None, include_cancelled: bool, actor: str | None
    ) -> JobRecord:
        """failed/dead/delayed (or cancelled when asked) → ready now with attempt 0, same run
        id, so completed steps are not re-run (`rules.can_retry`). `JobNotRetryableError`
        otherwise; `JobDuplicateError` if another live row now holds the key."""
        ...

    async def record_event(self, event: EventRecord) -> None: ...


@runtime_checkable
class StepStore(Protocol):
    """Completed steps of a run (rule 6), so a retry does not run them again."""

    async def load_steps(self, run_id: str) -> list[StepRecord]: ...

    async def save_steps_many(self, writes: Sequence[StepWrite]) -> list[JobsError | None]:
        """Upsert each step by `(run_id, name)`. One outcome per item, in order, as in
        `ack_many`: `JobSlotLostError` for an item whose token no longer holds its job, so a
        stale holder cannot write over a run that moved on. No two items share
        `(job_id, step name)`."""
        ...


@runtime_checkable
class SlotStore(Protocol):
    """Limiter slots: caps shared by every worker on this database."""

    async def acquire_slots(
        self, job_id: str, caps: Sequence[tuple[str, int]], expires_at: int
    ) -> str | None:
        """All or nothing: take one slot under each `(key, cap)` for `job_id`, or none. Returns
        the first key already at its cap, or None when every slot was taken. Expired slots do
        not count. Released by `release_slots`, `ack` and `nack`; extended by `heartbeat`."""
        ...

    async def release_slots(self, job_id: str) -> None: ...


@runtime_checkable
class PresenceStore(Protocol):
    """Workers' presence rows, so operators and health checks see who is alive."""

    async def worker_seen(self, info: WorkerInfo) -> None:
        """Upsert `info`'s presence row, and delete up to `EXPIRED_PER_BEAT` OTHER workers' rows
        expired at the clock's now (`engine.presence`), so a dead worker's row does not stay."""
        ...

    async def worker_gone(self, worker_id: str) -> None: ...

    async def live_workers(self, seen_since: int) -> list[WorkerInfo]: ...


@runtime_checkable
class WakeSource(Protocol):
    """Wake-ups: how an idle worker learns that new work may be due."""

    async def wait_for_work(self, timeout_ms: int) -> None:
        """Return when new work may be due (an enqueue here or, where the backend can tell,
        elsewhere), or after `timeout_ms` of clock time. Never raises on timeout."""
        ...


@runtime_checkable
class ChangeSource(Protocol):
    """Change signals (`engine.changes`): how a reader that follows state (the MCP server's
    subscriptions) learns that jobs, backfills or descriptors may have changed. Optional: not
    part of `Driver`, so a third-party driver without it still runs everything else."""

    async def wait_for_change(self, seen: int, timeout_ms: int) -> int:
        """The change count once it differs from `seen` (a write here or, where the backend
        can tell, elsewhere), or the count after `timeout_ms` of clock time. Never raises; any
        number of readers may wait at once and none consumes a change."""
        ...


@runtime_checkable
class BackfillLedger(Protocol):
    """The backfill ledger: one row per backfill run."""

    async def backfill_save(self, run: BackfillRun) -> None:
        """Insert or update the ledger row `run.run_id`."""
        ...

    async def backfill_runs(
        self,
        name: str | None = None,
        environment: str | None = None,
        *,
        status: BackfillStatus | None = None,
        before: RunPosition | None = None,
        limit: int | None = None,
    ) -> list[BackfillRun]:
        """Ledger rows, newest first ((started_at, run_id) descending): only those of `status`
        when given, only those strictly older than `before` when given, at most `limit` (≥ 1)
        when given. With `name` and `environment` both set, a page costs its own rows, not the
        ledger's (one index descent on a SQL driver)."""
        ...


@runtime_checkable
class SchedulerState(Protocol):
    """Each cron task's last fired occurrence and failure (a task's lease is a named one,
    LeaderLeases `task:<name>`)."""

    async def task_state(self, task: str) -> TaskState | None: ...

    async def task_claim(self, task: str, expected: int | None, occurrence_ms: int) -> bool:
        """Compare-and-set the task's last fired occurrence from `expected` (None: no state, or
        state that is none) to `occurrence_ms`, backwards too (a clock stepped back); False when
        it is no longer `expected`. The scheduler claims an occurrence so before it enqueues
        it, so of two schedulers one fires it, however long either takes. A claim clears the
        task's stored failure: the task fires again."""
        ...

    async def task_fire(
        self,
        task: str,
        expected: int | None,
        occurrences: Sequence[int],
        requests: Sequence[EnqueueRequest],
    ) -> list[EnqueueResult] | None:
        """Claim `occurrences` (ascending, at least one: the last fired occurrence moves from
        `expected` to the last of them, as `task_claim`) and enqueue `requests`, their jobs, as
        `enqueue` does; None, with nothing enqueued, when the claim is lost. No process may die
        between the two and lose an occurrence: a driver with transactions commits both or
        neither; one without stores the claimed occurrences with the claim and forgets them once
        their jobs are in, and until then `task_unfinished` answers them."""
        ...

    async def task_unfinished(self, task: str) -> list[int]:
        """The occurrences a `task_fire` claimed whose jobs may not all be in (its process died,
        or its enqueue failed), ascending: none on a driver that claims and enqueues in one
        transaction. The scheduler leading the task enqueues them again (their idempotency keys
        dedupe a job that did go in) and then calls `task_finished`."""
        ...

    async def task_finished(self, task: str, occurrences: Sequence[int]) -> None:
        """Forget `occurrences` from `task_unfinished`: their jobs are in."""
        ...

    async def task_failure(self, task: str, failure: TaskFailure) -> None:
        """Store why the task's latest round did not fire, in place of any earlier failure,
        beside its last fired occurrence (state with none is created): what describe and
        diagnose show from other processes."""
        ...


@runtime_checkable
class OutboxStore(Protocol):
    """The transactional outbox: jobs staged in the application's own transaction."""

    async def outbox_stage(self, tx: Any, requests: Sequence[EnqueueRequest]) -> list[str]:
        """Stage jobs inside the application's own open transaction `tx` (driver-specific type).
        `OutboxNoTxError` when `tx` is not in a transaction."""
        ...

    async def outbox_claim(
        self, relay_id: str, token: str, limit: int, lease_ms: int
    ) -> list[OutboxRow]:
        """Claim unpublished rows in `(staged_at, id)` order whose claim is free or expired."""
        ...

    async def outbox_publish(self, token: str, rows: Sequence[OutboxRow]) -> list[EnqueueResult]:
        """Enqueue the rows still claimed by `token` and unpublished, and mark them published
        (first writer wins), in one transaction. Rows no longer owned are skipped."""
        ...

    async def outbox_release(self, token: str, ids: Sequence[str]) -> None: ...

    async def outbox_waiting(self, limit: int) -> OutboxWaiting:
        """The rows staged and not yet published, claimed or not: how many (counted up to
        `limit`, on the unpublished rows only) and when the oldest was staged."""
        ...

    async def outbox_forget_published(self, published_before: int, limit: int) -> int:
        """Delete up to `limit` published rows whose `published_at` is before
        `published_before`, oldest first; never an unpublished one. Answers how many went."""
        ...


@runtime_checkable
class HistoryStore(Protocol):
    """Settled history, pruned by `engine.retention`'s rules: set-wise, oldest first."""

    async def prune_counts(
        self, cutoffs: Cutoffs, tenant_id: str | None = None
    ) -> list[PruneCount]:
        """Per state and queue, the settled rows `cutoffs.expired` holds for (with `tenant_id`,
        that tenant's only): what `prune` would take. Changes nothing."""
        ...

    async def prune(
        self, cutoffs: Cutoffs, limit: int, tenant_id: str | None = None
    ) -> list[PruneCount]:
        """Delete at most `limit` expired settled rows, oldest `finished_at` first, with their
        steps and events, in one short transaction; answer what went, per state and queue.
        Never a live row. Two callers at once never take (or count) one row twice."""
        ...

    async def count_jobless_events(self, before: int) -> int:
        """The events of no job (`job_id` None: the audit of calls that named no job the caller
        may see) recorded before `before`: what `forget_jobless_events` would take."""
        ...

    async def forget_jobless_events(self, before: int, limit: int) -> int:
        """Delete up to `limit` events of no job recorded (`at`) before `before`, oldest first;
        never an event tied to a job (it goes with its job). Answers how many went. Costs what
        it deletes, not the events kept."""
        ...


@runtime_checkable
class LeaderLeases(Protocol):
    """Named leadership leases: one holder at a time per name (the pruner's, say)."""

    async def lead(self, name: str, holder: str, lease_ms: int) -> bool:
        """Take or renew the lease `name`; True while `holder` holds it. A `lease_ms` of 0
        hands it back (it expires at once)."""
        ...


@runtime_checkable
class ManyLeaderLeases(Protocol):
    """`lead` for many names in one round trip (a scheduler renewing thousands of task leases)."""

    async def lead_many(self, names: Sequence[str], holder: str, lease_ms: int) -> set[str]:
        """`lead` each of `names`; answers those `holder` holds."""
        ...


async def lead_each(
    leases: LeaderLeases, names: Sequence[str], holder: str, lease_ms: int
) -> set[str]:
    """The names of `names` whose lease `holder` holds after taking or renewing each: in one
    round trip where the driver offers it."""
    if isinstance(leases, ManyLeaderLeases):
        return await leases.lead_many(names, holder, lease_ms)
    return {name for name in names if await leases.lead(name, holder, lease_ms)}


@runtime_checkable
class DescriptorStore(Protocol):
    """Published job descriptors (engine/descriptors.py): one row per job name, so a process
    without a job's code can describe and enqueue it."""

    async def publish_descriptors(
        self, worker_id: str, descriptors: Sequence[JobDescriptor], now: int
    ) -> None:
        """Upsert each descriptor by name, set-wise, stamped `published_by=worker_id` and
        `published_at=now` (`engine.descriptors.stamped`): the last writer wins. No two items
        share a name."""
        ...

    async def published_descriptors(self, name: str | None = None) -> list[JobDescriptor]:
        """Every published descriptor (only `name`'s when given), by name, as stored: `stale`
        is judged by the caller."""
        ...

    async def forget_descriptors(self, published_before: int) -> int:
        """Delete the descriptors published before `published_before`; answer how many."""
        ...


@runtime_checkable
class PauseStore(Protocol):
    """Pauses (schemas.pauses): queues and job names whose waiting jobs `claim` leaves alone.
    A driver that offers this filters its claim by the pauses stored at that claim, so a pause
    holds from the next claim after it commits. Optional, like ChangeSource: a driver without
    it claims as before and `Jobs.pause` answers DRIVER_CAPABILITY_MISSING."""

    async def pause(
        self, kind: PauseKind, name: str, actor: str | None, reason: str | None, now: int
    ) -> tuple[Pause, bool]:
        """Store the pause `(kind, name)` unless one is in force; answer the pause in force and
        whether it was there before this call (then nothing changed: the first pause stays)."""
        ...

    async def resume(self, kind: PauseKind, name: str) -> Pause | None:
        """Delete the pause `(kind, name)`; answer it, or None when none was in force."""
        ...

    async def pauses(self) -> list[Pause]:
        """Every pause in force, by (kind, name)."""
        ...


@runtime_checkable
class RerunStore(Protocol):
    """Rerun from a step (engine/reruns.py). Optional, like PauseStore: without it
    `Jobs.retry(from_step=...)` answers DRIVER_CAPABILITY_MISSING; a plain retry is unchanged."""

    async def rerun(
        self,
        job_id: str,
        tenant_id: str | None,
        from_step: str,
        include_cancelled: bool,
        actor: str | None,
        new_run_id: str,
    ) -> JobRecord:
        """In one transaction: `engine.reruns.plan_rerun` over the job and its run's steps (in
        run order), refused as `retry` is when another live row holds the key; then the copied
        steps under `new_run_id`, the row, and its `requeued` event. The old run's steps stay."""
        ...

    async def run_steps(self, job_id: str, run_id: str, tenant_id: str | None) -> list[StepRecord]:
        """The steps of one run of this job (a previous run included), in run order; empty when
        the job has no such run. JOB_NOT_FOUND when the job is not there (in that tenant)."""
        ...


@runtime_checkable
class EventStore(Protocol):
    """Inbound events and the jobs waiting for them (engine/inbound_events.py). Optional, like
    PauseStore: without it `ctx.step.wait_for_event` and `Jobs.send_event` answer
    DRIVER_CAPABILITY_MISSING."""

    async def send_event(self, event: InboundEvent, now: int) -> int:
        """Store `event` and, in the same transaction, set `run_at` to `now` (when later) on
        every suspended job whose waiter row has the event's (name, key, tenant); wake idle
        workers when any; answer how many jobs that was."""
        ...

    async def first_event(
        self,
        name: str,
        key: str,
        tenant_id: str | None,
        started_at: int,
        after: EventCursor | None,
    ) -> InboundEvent | None:
        """The earliest stored event, by (sent_at, id), that `inbound_events.matches`."""
        ...

    async def await_event(self, job_id: str, name: str, key: str, tenant_id: str | None) -> None:
        """Record that `job_id` waits for (name, key, tenant): the waiters index a send reads.
        One row per job; a second call replaces the first."""
        ...

    async def forget_waiter(self, job_id: str) -> None:
        """Delete `job_id`'s waiter row, if any."""
        ...

    async def wake_waiter(self, job_id: str, now: int) -> bool:
        """Set `run_at` to `now` (when later) on `job_id` if it is suspended; answer whether."""
        ...

    async def prune_events(self, now: int) -> int:
        """Delete the events that expired at or before `now` and the waiter rows of jobs no
        longer live; answer how many events went."""
        ...


@runtime_checkable
class RateStore(Protocol):
    """Rate limits (engine.rate_limits): one GCRA TAT per key, shared by every worker on this
    database. Optional, like PauseStore: a worker that has a rate to apply requires it."""

    async def take_rates(
        self, takes: Sequence[RateTake], now: int, job_id: str | None = None, up_to: int = 1
    ) -> RateVerdict:
        """All or nothing, atomically: take one start under every key of `takes` (as
        `rate_limits.take_all` decides over the stored TATs, up to `up_to` at once when every
        key admits them: the verdict's `spare`), or none when any key blocks.
        With `job_id`: a live reservation of that job answers first (`use_reservation`, deleted
        unless it holds the job back); else a blocked take reserves the job's slot
        (`take_all(reserve=True)`, `late_window_ms`) and stores it, in the same transaction.
        Every take deletes the reservations past their `late_at`."""
        ...

    async def rate_states(self, limit: int, prefix: str = "") -> list[RateState]:
        """Up to `limit` stored keys that start with `prefix`, by key: their TAT and the rate
        that last took there. Read a kind at a time (`job:`, `queue:`, `tenant:`), so the many
        keys computed from inputs never crowd a queue's or a tenant's out of an answer."""
        ...

    async def forget_idle_rates(self, tat_before: int, limit: int) -> int:
        """Delete up to `limit` stored keys whose TAT (epoch µs) is before `tat_before`
        (`rate_limits.idle_before_us`), leaving every other key and reservation; answers how
        many went. A take under a forgotten key decides as it did before: its TAT was past."""
        ...

    async def rate_reservations(self, limit: int) -> list[RateReservation]:
        """Up to `limit` stored reservations, by slot then job id."""
        ...


@runtime_checkable
class ProgressStore(Protocol):
    """A running job's reported progress (engine/progress.py). Optional, like PauseStore: on a
    driver without it `ctx.progress` checks its arguments and stores nothing."""

    async def save_progress(self, job_id: str, token: str, progress: Progress) -> bool:
        """Store `progress` on the job while `token` holds it running; answer whether it was
        written (False for a stale holder: nothing changes). Moves no other column."""
        ...


@runtime_checkable
class SettledCounts(Protocol):
    """Exact settled counts per interval (engine/settled_counts.py), for throughput. Optional,
    like PauseStore: without it `Jobs.settled_counts` answers None and the dashboard estimates."""

    async def settled_counts(
        self, since_ms: int, until_ms: int, *, tenant_id: str | None = None
    ) -> dict[str, SettledCount]:
        """Per queue, the stored jobs in a settled state with `since_ms <= finished_at <
        until_ms` (with `tenant_id`, that tenant's only), by state. Queues with none are
        absent. A database driver reads its settled index, never every row."""
        ...


@runtime_checkable
class TombstoneStore(Protocol):
    """The delete markers a store keeps for deleted keys (NATS KV keeps one per key, for good,
    and every process start replays them). Optional: only a store that keeps them offers it;
    the pruner's pass calls it."""

    async def forget_tombstones(self, deleted_before: int, limit: int) -> int:
        """Remove up to `limit` markers of keys deleted before `deleted_before` (epoch ms on
        the injected clock), never a value written after its marker; answers how many went."""
        ...


@dataclass(frozen=True)
class StoreReport:
    """What `mcp-jobs db report` prints: whether the server answered, and one fact a line."""

    reachable: bool
    lines: list[str]


@runtime_checkable
class ServerReport(Protocol):
    """The store as an operator needs to see it when it misbehaves: where the driver connects
    and as whom, the settings that refuse its writes, what holds its room and who holds it up.
    Optional: the fix of an unreachable, full or refusing server runs it (`mcp-jobs db report`),
    so it needs nothing but this package installed."""

    async def server_report(self) -> StoreReport:
        """Only reads, on a connection of its own tried once. A server that does not answer
        is a report (`reachable=False`, the failure in its first line), not an exception."""
        ...


@dataclass(frozen=True)
class RecordNeeds:
    """What a driver that holds a job in one record of bounded size (NATS: one KV value within
    the server's max_payload) needs of its own setting to hold a value the engine's bound
    refused: the engine's refusal then names every setting the value needs, in one line."""

    most: int  # the largest such value, in bytes of JSON, the record holds as set now
    reason: str  # what bounds the record, said with the refusal
    # The change, a line to apply, that makes the record hold the value; None: none can.
    setting: str | None
    details: dict[str, Any]  # for the error's details (e.g. {"max_payload": N})


@runtime_checkable
class RecordBounds(Protocol):
    """Optional: what a driver whose job record is bounded by a setting of its own needs for a
    value past the engine's bound. Asked only where the engine refuses a value (never on the hot
    path). None: the record holds the value as set now (or the driver cannot tell yet), and the
    engine's refusal stands as it is."""

    def input_needs(self, request: EnqueueRequest) -> RecordNeeds | None:
        """For `request`, a new job whose input is past the engine's bound."""
        ...

    def output_needs(self, job_id: str, size: int) -> RecordNeeds | None:
        """For `size` more bytes of JSON (a step's result or the output) in job `job_id` as
        this process last wrote or read it."""
        ...


@runtime_checkable
class Driver(
    JobStore,
    StepStore,
    SlotStore,
    PresenceStore,
    WakeSource,
    BackfillLedger,
    SchedulerState,
    OutboxStore,
    HistoryStore,
    LeaderLeases,
    DescriptorStore,
    Protocol,
):
    """A driver with every capability: what memory, SQLite and PostgreSQL implement."""


C = TypeVar("C")


@dataclass(frozen=True)
class Capability(Generic[C]):
    """A named capability and the Protocol a driver implements to offer it."""

    name: str
    protocol: type[Any]

    def offered_by(self, driver: object) -> bool:
        return isinstance(driver, self.protocol)


JOBS: Capability[JobStore] = Capability("jobs", JobStore)
STEPS: Capability[StepStore] = Capability("steps", StepStore)
SLOTS: Capability[SlotStore] = Capability("slots", SlotStore)
PRESENCE: Capability[PresenceStore] = Capability("presence", PresenceStore)
WAKE: Capability[WakeSource] = Capability("wake", WakeSource)
BACKFILL_LEDGER: Capability[BackfillLedger] = Capability("backfill_ledger", BackfillLedger)
SCHEDULER: Capability[SchedulerState] = Capability("scheduler", SchedulerState)
OUTBOX: Capability[OutboxStore] = Capability("outbox", OutboxStore)
HISTORY: Capability[HistoryStore] = Capability("history", HistoryStore)
LEADER_LEASES: Capability[LeaderLeases] = Capability("leader_leases", LeaderLeases)
DESCRIPTORS: Capability[DescriptorStore] = Capability("descriptors", DescriptorStore)
# Optional and outside CAPABILITIES (the union every built-in driver offers): see ChangeSource
# and PauseStore.
CHANGES: Capability[ChangeSource] = Capability("changes", ChangeSource)
PAUSES: Capability[PauseStore] = Capability("pauses", PauseStore)
PROGRESS: Capability[ProgressStore] = Capability("progress", ProgressStore)
RATES: Capability[RateStore] = Capability("rates", RateStore)
RERUNS: Capability[RerunStore] = Capability("reruns", RerunStore)
EVENTS: Capability[EventStore] = Capability("events", EventStore)
SETTLED: Capability[SettledCounts] = Capability("settled_counts", SettledCounts)
TOMBSTONES: Capability[TombstoneStore] = Capability("tombstones", TombstoneStore)
REPORT: Capability[ServerReport] = Capability("report", ServerReport)
RECORD_BOUNDS: Capability[RecordBounds] = Capability("record_bounds", RecordBounds)
CAPABILITIES: tuple[Capability[Any], ...] = (
    JOBS,
    STEPS,
    SLOTS,
    PRESENCE,
    WAKE,
    BACKFILL_LEDGER,
    SCHEDULER,
    OUTBOX,
    HISTORY,
    LEADER_LEASES,
    DESCRIPTORS,
)


def capabilities(driver: object) -> frozenset[str]:
    """The names of the capabilities `driver` offers."""
    return frozenset(c.name for c in CAPABILITIES if c.offered_by(driver))


def require(driver: object, capability: Capability[C]) -> C:
    """`driver` typed as `capability`'s Protocol, or DRIVER_CAPABILITY_MISSING naming what it
    lacks. Checks attribute presence (runtime_checkable), so call it once at setup, not per job."""
    if not capability.offered_by(driver):
        missing = [name for name in _members(capability.protocol) if not hasattr(driver, name)]
        kind = str(getattr(driver, "kind", type(driver).__name__))
        raise DriverCapabilityMissingError(kind, capability.name, missing)
    return cast(C, driver)


def _members(protocol: type[Any]) -> list[str]:
    names: set[str] = set()
    for cls in protocol.__mro__:
        if cls.__module__ == __name__:
            names.update(getattr(cls, "__annotations__", {}))
            names.update(n for n in vars(cls) if not n.startswith("_"))
    return sorted(names)
