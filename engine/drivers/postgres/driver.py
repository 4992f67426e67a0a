"""`PostgresDriver`: the production backend. Jobs come from `PgJobs`; this adds limiter slots,
worker presence, the backfill ledger, the scheduler's state and lease, and the outbox."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import asyncpg

from engine.drivers.postgres import rows
from engine.drivers.postgres.jobs import PgJobs
from engine.errors import OutboxNoTxError
from engine.ids import new_id
from engine.presence import EXPIRED_PER_BEAT, expired_before
from schemas.backfill import BackfillRun
from schemas.jobs import EnqueueRequest, EnqueueResult
from schemas.outbox import OutboxRow
from schemas.scheduler import TaskState
from schemas.stats import WorkerInfo


class PostgresDriver(PgJobs):
    """The driver Protocol over an asyncpg pool, in its own PostgreSQL schema."""

    # --- limiter slots ------------------------------------------------------------------------

    async def acquire_slots(
        self, job_id: str, caps: Sequence[tuple[str, int]], expires_at: int
    ) -> str | None:
        if not caps:
            return None
        # Re-running it for the same job decides the same way (its own slot never counts).
        args = (job_id, [k for k, _ in caps], [c for _, c in caps], self.clock.now_ms(), expires_at)
        blocked: str | None = await self.idempotent(
            lambda c: c.fetchval(self.q["acquire_slots"], *args)
        )
        return blocked

    async def release_slots(self, job_id: str) -> None:
        await self.idempotent(lambda c: c.execute(self.q["release_slots"], job_id))

    # --- workers ------------------------------------------------------------------------------

    async def worker_seen(self, info: WorkerInfo) -> None:
        args = (
            info.id,
            info.hostname,
            info.pid,
            info.queues,
            info.concurrency,
            info.started_at,
            info.last_seen_at,
            expired_before(self.clock.now_ms()),
            EXPIRED_PER_BEAT,
        )
        await self.idempotent(lambda c: c.execute(self.q["worker_seen"], *args))

    async def worker_gone(self, worker_id: str) -> None:
        await self.idempotent(lambda c: c.execute(self.q["worker_gone"], worker_id))

    async def live_workers(self, seen_since: int) -> list[WorkerInfo]:
        found = await self.idempotent(lambda c: c.fetch(self.q["live_workers"], seen_since))
        return [rows.worker(row) for row in found]

    # --- backfill ledger ----------------------------------------------------------------------

    async def backfill_save(self, run: BackfillRun) -> None:
        args = (
            run.run_id,
            run.name,
            run.checksum,
            run.environment,
            run.status,
            run.app_version,
            run.rows_processed,
            run.rows_total,
            rows.dump(run.cursor),
            run.job_id,
            run.started_at,
            run.finished_at,
            run.error,
        )
        await self.idempotent(lambda c: c.execute(self.q["backfill_save"], *args))

    async def backfill_runs(
        self, name: str | None = None, environment: str | None = None
    ) -> list[BackfillRun]:
        found = await self.idempotent(lambda c: c.fetch(self.q["backfill_runs"], name, environment))
        return [rows.backfill(row) for row in found]

    # --- scheduler ----------------------------------------------------------------------------

    async def scheduler_lead(self, holder: str, lease_ms: int) -> bool:
        # Idempotent for one holder: a second run finds its own lease and renews it.
        now = self.clock.now_ms()
        taken = await self.idempotent(
            lambda c: c.fetchval(self.q["scheduler_lead"], holder, now, lease_ms)
        )
        return taken is not None

    async def task_state(self, task: str) -> TaskState | None:
        row = await self.idempotent(lambda c: c.fetchrow(self.q["task_state"], task))
        return rows.task(row) if row is not None else None

    async def task_fired(self, task: str, occurrence_ms: int) -> None:
        now = self.clock.now_ms()
        await self.idempotent(lambda c: c.execute(self.q["task_fired"], task, occurrence_ms, now))

    # --- outbox -------------------------------------------------------------------------------

    async def outbox_stage(self, tx: Any, requests: Sequence[EnqueueRequest]) -> list[str]:
        """Stage through the application's own connection `tx`, which must be inside a
        transaction: the jobs then exist exactly when the application's write commits."""
        # isinstance() also accepts a pool's connection proxy (asyncpg's metaclass says so).
        if not isinstance(tx, asyncpg.Connection) or not tx.is_in_transaction():
            raise OutboxNoTxError(self.kind)
        ids = [new_id() for _ in requests]
        if not ids:
            return []
        async with self.guard():
            await tx.execute(
                self.q["outbox_stage"],
                self.clock.now_ms(),
                ids,
                [r.to_json() for r in requests],
            )
        return ids

    async def outbox_claim(
        self, relay_id: str, token: str, limit: int, lease_ms: int
    ) -> list[OutboxRow]:
        if limit <= 0:
            return []
        async with self.conn() as conn:
            found = await conn.fetch(
                self.q["outbox_claim"], self.clock.now_ms(), limit, token, lease_ms
            )
        claimed = [rows.outbox(row) for row in found]
        claimed.sort(key=lambda r: (r.staged_at, r.id))
        return claimed

    async def outbox_publish(self, token: str, rows_: Sequence[OutboxRow]) -> list[EnqueueResult]:
        if not rows_:
            return []
        inserted = False
        async with self.conn() as conn, conn.transaction():
            locked = await conn.fetch(self.q["outbox_owned"], [r.id for r in rows_], token)
            by_id = {row["id"]: rows.outbox(row) for row in locked}
            owned = [by_id[r.id] for r in rows_ if r.id in by_id]
            if not owned:
                return []
            # The enqueue and the stamp commit together, or neither does.
            results, inserted = await self.enqueue_on(conn, [r.request for r in owned])
            await conn.execute(
                self.q["outbox_mark_published"],
                self.clock.now_ms(),
                [r.id for r in owned],
                [result.id for result in results],
            )
        if inserted:
            self.signal.notify()
        return results

    async def outbox_release(self, token: str, ids: Sequence[str]) -> None:
        if not ids:
            return
        await self.idempotent(lambda c: c.execute(self.q["outbox_release"], list(ids), token))
