"""The one driver Protocol every backend implements: job-level operations over `schemas` models.

A driver never exposes SQL (or any storage shape) to its callers. Every method takes and returns
models; times are epoch ms read from the driver's injected clock. The parity suite in
`tests/parity/` is the executable half of this contract.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from engine.clock import Clock
from schemas.backfill import BackfillRun
from schemas.events import EventRecord
from schemas.jobs import (
    ClaimedJob,
    EnqueueRequest,
    EnqueueResult,
    HeartbeatResult,
    JobFilter,
    JobPage,
    JobRecord,
    NackOptions,
)
from schemas.outbox import OutboxRow
from schemas.scheduler import TaskState
from schemas.stats import QueueStats, WorkerInfo
from schemas.steps import StepRecord


class Driver(Protocol):
    """Storage for jobs, steps, events, limiter slots, workers, backfills, tasks and the outbox."""

    kind: str  # "memory" | "sqlite" | "postgres"
    clock: Clock

    async def migrate(self) -> None:
        """Create or upgrade every durable table. Idempotent and safe to run concurrently."""
        ...

    async def close(self) -> None: ...

    # --- jobs ---------------------------------------------------------------------------------

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
        self, worker_id: str, limit: int, lease_ms: int, queues: Sequence[str] | None = None
    ) -> list[ClaimedJob]:
        """Take up to `limit` due jobs in `(run_at, id)` order and lease them to `worker_id`.

        Claimable: state ready/delayed/suspended with `run_at <= now`, or running with an expired
        lease (rule 13). Never cancelled or any settled state. Sets state running, a fresh
        token, `lease_expires_at = now + lease_ms`, and increments `attempt`.
        """
        ...

    async def heartbeat(self, job_id: str, token: str, lease_ms: int) -> HeartbeatResult:
        """Extend the lease (and the job's limiter slots). `JobSlotLostError` if the token no
        longer holds the job; `cancel_requested=True` if an operator cancelled it."""
        ...

    async def ack(self, job_id: str, token: str, output: Any = None) -> None:
        """Settle as done, store `output`, release the lease and slots. Fenced by token."""
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
        self, job_id: str, tenant_id: str | None = None
    ) -> tuple[JobRecord, list[StepRecord], list[EventRecord]]:
        """The record, its run's steps in start order, and its events oldest first."""
        ...

    async def stats(self, queues: Sequence[str] | None = None) -> list[QueueStats]:
        """Per queue, following rule 7. Queues with no rows at all are omitted."""
        ...

    async def cancel(self, job_id: str, tenant_id: str | None, actor: str | None) -> JobRecord:
        """Live → cancelled (terminal). A running job keeps its token so the holder's next
        heartbeat sees `cancel_requested`. `JobNotCancellableError` when settled."""
        ...

    async def retry(
        self, job_id: str, tenant_id: str | None, include_cancelled: bool, actor: str | None
    ) -> JobRecord:
        """failed/dead (or cancelled when asked) → ready now with attempt 0, same run id, so
        completed steps are not re-run. `JobNotRetryableError` otherwise; `JobDuplicateError`
        if another live row now holds the key."""
        ...

    async def record_event(self, event: EventRecord) -> None: ...

    # --- steps (rule 6) -----------------------------------------------------------------------

    async def load_steps(self, run_id: str) -> list[StepRecord]: ...

    async def save_step(self, job_id: str, token: str, step: StepRecord) -> None:
        """Upsert by `(run_id, name)`. `JobSlotLostError` if the token no longer holds the job,
        so a stale holder cannot write over a run that moved on."""
        ...

    # --- limiter slots: caps shared by every worker on this database --------------------------

    async def acquire_slots(
        self, job_id: str, caps: Sequence[tuple[str, int]], expires_at: int
    ) -> str | None:
        """All or nothing: take one slot under each `(key, cap)` for `job_id`, or none. Returns
        the first key already at its cap, or None when every slot was taken. Expired slots do
        not count. Released by `release_slots`, `ack` and `nack`; extended by `heartbeat`."""
        ...

    async def release_slots(self, job_id: str) -> None: ...

    # --- workers ------------------------------------------------------------------------------

    async def worker_seen(self, info: WorkerInfo) -> None:
        """Upsert `info`'s presence row, and delete up to `EXPIRED_PER_BEAT` OTHER workers' rows
        expired at the clock's now (`engine.presence`), so a dead worker's row does not stay."""
        ...

    async def worker_gone(self, worker_id: str) -> None: ...

    async def live_workers(self, seen_since: int) -> list[WorkerInfo]: ...

    # --- wake-ups -----------------------------------------------------------------------------

    async def wait_for_work(self, timeout_ms: int) -> None:
        """Return when new work may be due (an enqueue here or, where the backend can tell,
        elsewhere), or after `timeout_ms` of clock time. Never raises on timeout."""
        ...

    # --- backfill ledger ----------------------------------------------------------------------

    async def backfill_save(self, run: BackfillRun) -> None:
        """Insert or update the ledger row `run.run_id`."""
        ...

    async def backfill_runs(
        self, name: str | None = None, environment: str | None = None
    ) -> list[BackfillRun]:
        """Ledger rows, newest first."""
        ...

    # --- scheduler ----------------------------------------------------------------------------

    async def scheduler_lead(self, holder: str, lease_ms: int) -> bool:
        """Take or renew the one scheduler leadership lease; True while `holder` leads."""
        ...

    async def task_state(self, task: str) -> TaskState | None: ...

    async def task_fired(self, task: str, occurrence_ms: int) -> None:
        """Record the latest fired occurrence; never moves backwards."""
        ...

    # --- outbox -------------------------------------------------------------------------------

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
