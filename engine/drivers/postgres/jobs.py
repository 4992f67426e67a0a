"""Job-level operations over PostgreSQL: claim, settle, read, cancel, retry, steps (enqueue is
in enqueue.py).

Each mirrors the memory driver's semantics exactly (the parity suite compares them); the SQL is
in queries.sql. The happy path writes no events: only a nack that names an error or parks, a
dead letter, a cancel, a retry and `record_event` do, as in memory.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg

from engine.drivers.postgres import rows
from engine.drivers.postgres.batch import GroupCommit, Item, flush_apart, settle_all
from engine.drivers.postgres.enqueue import PgEnqueue
from engine.drivers.postgres.faults import data_error, describe_refusal, is_connection_failure
from engine.drivers.postgres.migrate import Conn
from engine.drivers.postgres.sweep import Sweeper
from engine.errors import (
    DriverUnavailableError,
    JobDuplicateError,
    JobNotCancellableError,
    JobNotFoundError,
    JobNotRetryableError,
    JobOutputInvalidError,
    JobSlotLostError,
)
from engine.ids import new_token
from engine.storable import find_unstorable
from schemas.events import EventRecord
from schemas.jobs import (
    ClaimedJob,
    HeartbeatResult,
    JobFilter,
    JobPage,
    JobRecord,
    NackOptions,
)
from schemas.states import RETRYABLE_STATES, JobState
from schemas.stats import QueueStats
from schemas.steps import StepRecord


@dataclass(frozen=True)
class _Ack:
    job_id: str
    token: str
    # This ack as an element of ack_many's JSON array; a null output keeps the row's. Encoded
    # by the caller, so an output that is not JSON fails its own ack, not the batch.
    row: str
    output: Any  # kept to name what the server refused, should it refuse this row


@dataclass(frozen=True)
class _StepWrite:
    job_id: str
    token: str
    step: StepRecord
    row: str  # this write as an element of save_steps' JSON array (encoded by the caller)


def _json_array(elements: Sequence[str]) -> str:
    return "[" + ",".join(elements) + "]"


def _refused_output(
    job_id: str, origin: str, output: Any, refusal: BaseException
) -> JobOutputInvalidError:
    """The error for one write the server refused on its own: where its output breaks the
    engine's rule, or else the server's reason. Terminal: sent again, it fails again."""
    bad = find_unstorable(output)
    path, reason = (bad.path, bad.reason) if bad is not None else ("$", describe_refusal(refusal))
    error = JobOutputInvalidError(job_id, origin, path, reason)
    error.__cause__ = refusal
    return error


def _refused_ack(item: Item[_Ack], refusal: BaseException) -> BaseException:
    return _refused_output(item.value.job_id, "the job", item.value.output, refusal)


def _refused_step(item: Item[_StepWrite], refusal: BaseException) -> BaseException:
    step = item.value.step
    return _refused_output(item.value.job_id, f'step "{step.name}"', step.output, refusal)


class PgJobs(PgEnqueue):
    # Made on first use: one queue per kind of settle write, each with one flush in flight.
    _acks: GroupCommit[_Ack] | None = None
    _steps: GroupCommit[_StepWrite] | None = None
    _loads: GroupCommit[str] | None = None
    # Made by the first claim: only a process that claims vacuums.
    sweeper: Sweeper | None = None
    # When (jobs' clock) claims may take over expired leases again after an outage.
    _take_over_from = 0

    async def close(self) -> None:
        if self.sweeper is not None:
            await self.sweeper.close()
        await super().close()
        # A flush still running when the pool closed has committed or failed by now; let it
        # hand its callers their outcome before the driver is gone.
        for queue in (self._acks, self._steps, self._loads):
            if queue is not None:
                await queue.idle()

    # --- claim and settle ---------------------------------------------------------------------

    async def claim(
        self, worker_id: str, limit: int, lease_ms: int, queues: Sequence[str] | None = None
    ) -> list[ClaimedJob]:
        if limit <= 0 or (queues is not None and not queues):
            return []
        # Settles held through an outage first: their jobs are not run again here.
        if self._holding:
            await self.flush_held()
        token = new_token()
        try:
            async with self.conn() as conn:
                found = await self._claim_rows(conn, worker_id, limit, lease_ms, queues, token)
        except DriverUnavailableError as exc:
            if not self._retry_deadline_ms or not is_connection_failure(exc):
                raise

            async def again(first: bool) -> list[asyncpg.Record]:
                async with self.conn() as conn:
                    # The broken try may have committed: its rows carry its token.
                    mine = await conn.fetch(self.q["claimed_with"], token)
                    if mine:
                        return mine
                    return await self._claim_rows(conn, worker_id, limit, lease_ms, queues, token)

            found = await self.retrying(again)
        claimed = [
            ClaimedJob(
                record=rows.job(row),
                token=row["lease_token"],
                lease_expires_at=row["lease_expires_at"],
                has_steps=row["has_steps"],
            )
            for row in found
        ]
        claimed.sort(key=lambda c: (c.record.run_at, c.record.id))
        if claimed:
            sweeper = self.sweeper
            if sweeper is None:
                sweeper = self.sweeper = Sweeper(self, self.vacuum_dead_rows)
            sweeper.claimed(len(claimed))
        return claimed

    async def _claim_rows(
        self,
        conn: Conn,
        worker_id: str,
        limit: int,
        lease_ms: int,
        queues: Sequence[str] | None,
        token: str,
    ) -> list[asyncpg.Record]:
        now = self.clock.now_ms()
        # After an outage, running jobs keep their leases one lease longer: holders that lived
        # through it reach the server again, flush their settles and heartbeat.
        outage = self.outage_seen
        take_over = not outage and now >= self._take_over_from
        if queues is None:
            found = await conn.fetch(
                self.q["claim"], now, limit, worker_id, lease_ms, token, take_over
            )
        else:
            found = await conn.fetch(
                self.q["claim_queues"],
                now,
                limit,
                worker_id,
                lease_ms,
                token,
                list(queues),
                take_over,
            )
        if outage:
            self.outage_seen = False
            self._take_over_from = now + lease_ms
        return found

    async def heartbeat(self, job_id: str, token: str, lease_ms: int) -> HeartbeatResult:
        expires = self.clock.now_ms() + lease_ms
        found = await self.idempotent(
            lambda c: c.fetch(self.q["heartbeat"], job_id, token, expires)
        )
        if not found:
            raise JobSlotLostError(job_id)
        row = found[0]
        if row["state"] == "cancelled":
            return HeartbeatResult(
                lease_expires_at=row["lease_expires_at"] or 0, cancel_requested=True
            )
        return HeartbeatResult(lease_expires_at=row["lease_expires_at"], cancel_requested=False)

    async def ack(self, job_id: str, token: str, output: Any = None) -> None:
        # Group-committed: concurrent acks share one statement; this returns once it committed.
        if self._acks is None:
            self._acks = GroupCommit(self._flush_acks)
        row = rows.json_text({"id": job_id, "token": token, "output": output})
        await self._acks.submit(_Ack(job_id, token, row, output), job_id)

    async def _flush_acks(self, batch: Sequence[Item[_Ack]]) -> None:
        # A row the server refuses (a value jsonb will not take) fails its own ack, not the batch.
        await flush_apart(batch, self._ack_batch, data_error, _refused_ack)

    async def _ack_batch(self, batch: Sequence[Item[_Ack]]) -> None:
        acks = _json_array([item.value.row for item in batch])

        async def once(first: bool) -> set[tuple[str, str]]:
            async with self.conn() as conn:
                found = await conn.fetch(self.q["ack_many"], acks, self.clock.now_ms())
                done = {(row["id"], row["token"]) for row in found}
                if not first and len(done) < len(batch):
                    # The try whose connection broke may have committed some of these.
                    ids = [item.value.job_id for item in batch]
                    tokens = [item.value.token for item in batch]
                    settled = await conn.fetch(self.q["settled_many"], ids, tokens)
                    done |= {(row["id"], row["token"]) for row in settled if row["state"] == "done"}
            return done

        done = await self.resilient(once)
        settle_all(
            batch,
            lambda item: (
                None
                if (item.value.job_id, item.value.token) in done
                else JobSlotLostError(item.value.job_id)
            ),
        )

    async def nack(self, job_id: str, token: str, options: NackOptions) -> JobRecord:
        now = self.clock.now_ms()
        state: JobState
        event: str | None
        run_at: int | None
        if options.dead_letter or options.fail:
            state = "dead" if options.dead_letter else "failed"
            run_at, keep_queued_at, finished_at, event = None, True, now, state
        else:
            run_at = now + max(0, options.delay_ms)
            if options.park:
                state = "suspended"
            elif options.delay_ms > 0 and not options.is_shed:
                state = "delayed"
            else:
                state = "ready"
            # A shed keeps queued_at so the oldest-ready age keeps growing (rule 7).
            keep_queued_at, finished_at = options.is_shed, None
            event = "parked" if options.park else ("retried" if options.error is not None else None)

        async def once(first: bool) -> JobRecord:
            async with self.conn() as conn:
                row = await conn.fetchrow(
                    self.q["nack"],
                    job_id,
                    token,
                    state,
                    options.counts_as_attempt,
                    run_at,
                    keep_queued_at,
                    options.error,
                    finished_at,
                    now,
                    event,
                )
                if row is None and not first:
                    row = await conn.fetchrow(self.q["settled_by"], job_id, token)
            if row is None:
                raise JobSlotLostError(job_id)
            return rows.job(row)

        record = await self.resilient(once)
        if record.state in ("ready", "delayed", "suspended"):
            self.signal.notify()
        return record

    # --- read ---------------------------------------------------------------------------------

    async def get(self, job_id: str, tenant_id: str | None = None) -> JobRecord:
        row = await self.idempotent(lambda c: c.fetchrow(self.q["get"], job_id, tenant_id))
        if row is None:
            raise JobNotFoundError(job_id, tenant_id)
        return rows.job(row)

    async def list_jobs(self, filter: JobFilter) -> JobPage:
        args = (
            list(filter.states) if filter.states is not None else None,
            filter.name,
            filter.queue,
            filter.tenant_id,
            filter.cursor,
            filter.limit + 1,
        )
        found = await self.idempotent(lambda c: c.fetch(self.q["list_jobs"], *args))
        page = [rows.job(row) for row in found[: filter.limit]]
        more = len(found) > filter.limit
        return JobPage(jobs=page, next_cursor=page[-1].id if more and page else None)

    async def load_trace(
        self, job_id: str, tenant_id: str | None = None
    ) -> tuple[JobRecord, list[StepRecord], list[EventRecord]]:
        async def read(
            conn: Conn,
        ) -> tuple[JobRecord, list[asyncpg.Record], list[asyncpg.Record]]:
            row = await conn.fetchrow(self.q["get"], job_id, tenant_id)
            if row is None:
                raise JobNotFoundError(job_id, tenant_id)
            record = rows.job(row)
            steps = await conn.fetch(self.q["trace_steps"], record.run_id)
            events = await conn.fetch(self.q["trace_events"], job_id)
            return record, steps, events

        record, steps, events = await self.idempotent(read)
        return record, [rows.step(s) for s in steps], [rows.event(e) for e in events]

    async def stats(self, queues: Sequence[str] | None = None) -> list[QueueStats]:
        args = (self.clock.now_ms(), list(queues) if queues is not None else None)
        found = await self.idempotent(lambda c: c.fetch(self.q["stats"], *args))
        # Sorted here, not in SQL: Python's code-point order, whatever the database collation.
        return sorted((rows.queue_stats(row) for row in found), key=lambda s: s.queue)

    # --- operate ------------------------------------------------------------------------------

    async def cancel(self, job_id: str, tenant_id: str | None, actor: str | None) -> JobRecord:
        async with self.conn() as conn:
            row = await conn.fetchrow(
                self.q["cancel"], job_id, tenant_id, self.clock.now_ms(), actor
            )
        if row is None:
            raise JobNotFoundError(job_id, tenant_id)
        if row["id"] is None:
            raise JobNotCancellableError(job_id, rows.job_state(row["previous_state"]))
        return rows.job(row)

    async def retry(
        self, job_id: str, tenant_id: str | None, include_cancelled: bool, actor: str | None
    ) -> JobRecord:
        args = (job_id, tenant_id, include_cancelled, self.clock.now_ms(), actor, self.channel)
        async with self.conn() as conn:
            try:
                row = await conn.fetchrow(self.q["retry"], *args)
            except asyncpg.UniqueViolationError:
                # A live row took the key between our look and our write: look again.
                row = await conn.fetchrow(self.q["retry"], *args)
        if row is None:
            raise JobNotFoundError(job_id, tenant_id)
        if row["id"] is None:
            previous = rows.job_state(row["previous_state"])
            cancelled_ok = include_cancelled and previous == "cancelled"
            allowed = previous in RETRYABLE_STATES or cancelled_ok
            if allowed and row["holder_id"] is not None:
                raise JobDuplicateError(
                    row["target_name"], row["target_key"], row["holder_id"], row["target_tenant"]
                )
            raise JobNotRetryableError(job_id, previous)
        self.signal.notify()
        return rows.job(row)

    async def record_event(self, event: EventRecord) -> None:
        async with self.conn() as conn:
            await conn.execute(
                self.q["record_event"],
                event.job_id,
                event.at,
                event.kind,
                event.actor,
                event.tenant_id,
                rows.dump(event.data),
            )

    # --- steps (rule 6) -----------------------------------------------------------------------

    async def load_steps(self, run_id: str) -> list[StepRecord]:
        # Batched like the writes: every job starting at once reads its steps in one statement.
        if self._loads is None:
            self._loads = GroupCommit(self._flush_loads)
        found: list[StepRecord] = await self._loads.submit(run_id, run_id)
        return found

    async def _flush_loads(self, batch: Sequence[Item[str]]) -> None:
        run_ids = [item.value for item in batch]
        found = await self.idempotent(lambda c: c.fetch(self.q["load_steps_many"], run_ids))
        by_run: dict[str, list[StepRecord]] = {run_id: [] for run_id in run_ids}
        for row in found:
            by_run[row["run_id"]].append(rows.step(row))
        for item in batch:
            item.result, item.finished = by_run[item.value], True

    async def save_step(self, job_id: str, token: str, step: StepRecord) -> None:
        # Group-committed like ack: returns only once the statement holding this step committed.
        if self._steps is None:
            self._steps = GroupCommit(self._flush_steps)
        row = rows.json_text(
            {
                "held_id": job_id,
                "token": token,
                "run_id": step.run_id,
                "name": step.name,
                "job_id": step.job_id,
                "status": step.status,
                "output": step.output,
                "error": step.error,
                "started_at": step.started_at,
                "finished_at": step.finished_at,
                "attempts": step.attempts,
            }
        )
        await self._steps.submit(_StepWrite(job_id, token, step, row), (step.run_id, step.name))

    async def _flush_steps(self, batch: Sequence[Item[_StepWrite]]) -> None:
        await flush_apart(batch, self._step_batch, data_error, _refused_step)

    async def _step_batch(self, batch: Sequence[Item[_StepWrite]]) -> None:
        steps = _json_array([item.value.row for item in batch])

        async def once(first: bool) -> set[tuple[str, str]]:
            # An upsert of the same values: safe to repeat after a broken connection.
            async with self.conn() as conn:
                found = await conn.fetch(self.q["save_steps"], steps)
            return {(row["run_id"], row["name"]) for row in found}

        written = await self.resilient(once)
        settle_all(
            batch,
            lambda item: (
                None
                if (item.value.step.run_id, item.value.step.name) in written
                else JobSlotLostError(item.value.job_id)
            ),
        )
