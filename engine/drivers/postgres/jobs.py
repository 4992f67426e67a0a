"""Job-level operations over PostgreSQL: enqueue, claim, settle, read, cancel, retry, steps.

Each mirrors the memory driver's semantics exactly (the parity suite compares them); the SQL is
in queries.sql. The happy path writes no events: only a nack that names an error or parks, a
dead letter, a cancel, a retry and `record_event` do, as in memory.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import asyncpg
from asyncpg.transaction import Transaction
from pydantic_core import PydanticSerializationError, to_json

from engine.drivers.postgres import rows
from engine.drivers.postgres.batch import GroupCommit, Item, settle_all
from engine.drivers.postgres.core import PgCore
from engine.drivers.postgres.migrate import Conn
from engine.drivers.postgres.sweep import Sweeper
from engine.errors import (
    DriverUnavailableError,
    JobDuplicateError,
    JobNotCancellableError,
    JobNotFoundError,
    JobNotRetryableError,
    JobSlotLostError,
)
from engine.ids import new_token
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
from schemas.states import RETRYABLE_STATES, JobState
from schemas.stats import QueueStats
from schemas.steps import StepRecord

DedupeKey = tuple[str, str, str]
# How many inserts enqueue spends on items whose holder settled between statements.
_ENQUEUE_ROUNDS = 5
# After a large batch met a held key, how many large batches go straight to the insert that
# skips held keys: a caller enqueuing keys again (a backfill run twice) pays for the failed try
# once in this many batches, not in every one.
_SKIPPING_BATCHES = 32
_DEDUPE_INDEX = "jobs_dedupe_live_idx"


def dedupe_key(request: EnqueueRequest) -> DedupeKey:
    # `or ''` is the index's coalesce: all tenantless rows share one namespace (rule 2).
    return (request.name, request.tenant_id or "", request.idempotency_key)


class _Holder(NamedTuple):
    """The live row that holds a dedupe key an insert was refused for."""

    id: str
    run_id: str
    state: JobState


@dataclass(frozen=True)
class _Ack:
    job_id: str
    token: str
    # This ack as an element of ack_many's JSON array; a null output keeps the row's. Encoded
    # by the caller, so an output that is not JSON fails its own ack, not the batch.
    row: str


@dataclass(frozen=True)
class _StepWrite:
    job_id: str
    token: str
    step: StepRecord
    row: str  # this write as an element of save_steps' JSON array (encoded by the caller)


def _json_array(elements: Sequence[str]) -> str:
    return "[" + ",".join(elements) + "]"


class PgJobs(PgCore):
    # Made on first use: one queue per kind of settle write, each with one flush in flight.
    _acks: GroupCommit[_Ack] | None = None
    _steps: GroupCommit[_StepWrite] | None = None
    _loads: GroupCommit[str] | None = None
    # Made by the first claim: only a process that claims vacuums.
    sweeper: Sweeper | None = None
    # Large batches left to insert skipping held keys before one expects all-new keys again.
    _skipping = 0

    async def close(self) -> None:
        if self.sweeper is not None:
            await self.sweeper.close()
        await super().close()
        # A flush still running when the pool closed has committed or failed by now; let it
        # hand its callers their outcome before the driver is gone.
        for queue in (self._acks, self._steps, self._loads):
            if queue is not None:
                await queue.idle()

    # --- enqueue ------------------------------------------------------------------------------

    async def enqueue(self, requests: Sequence[EnqueueRequest]) -> list[EnqueueResult]:
        if not requests:
            return []
        if len(requests) == 1 and (one := await self.on_conn(self._insert_one, requests[0])):
            self.signal.notify()
            return [one]
        async with self.conn() as conn:
            # A single item that was refused goes straight to finding its holder.
            results, inserted = await self.enqueue_on(conn, requests, refused=len(requests) == 1)
        if inserted:
            self.signal.notify()
        return results

    async def _insert_one(self, conn: Conn, request: EnqueueRequest) -> EnqueueResult | None:
        """The single-item fast road: the result when the row went in; None when its key is
        held (nothing was written)."""
        now = self.clock.now_ms()
        r = request
        found = await conn.fetch(
            self.q["enqueue_one"],
            now,
            r.id,
            r.run_id,
            r.name,
            r.queue,
            r.tenant_id,
            r.idempotency_key,
            _json(r.input),
            r.initial_state(now),
            r.max_attempts,
            r.run_at,
            r.timeout_ms,
            r.traceparent,
            r.enqueued_by,
            self.channel,
        )
        return _inserted(r, now) if found else None

    async def enqueue_parts(self, parts: Iterable[Sequence[EnqueueRequest]]) -> list[EnqueueResult]:
        """A large batch, one transaction, inserted part by part as the caller builds it: the
        server inserts one part while this process validates the next, so the two costs
        overlap instead of adding up. A refusal (an invalid item, or a duplicate under
        `on_conflict='error'`) rolls the whole batch back and comes out unchanged.

        The batch first goes in expecting every key to be new (`enqueue_new`, a fifth cheaper
        on the server). A held key fails that statement and rolls the batch back; it then goes
        in again, parts already built first, with the insert that skips held keys, which the
        next `_SKIPPING_BATCHES` batches also take."""
        if self._skipping:
            self._skipping -= 1
            return await self._enqueue_parts(iter(parts), new=False)
        remaining = iter(parts)
        built: list[Sequence[EnqueueRequest]] = []
        try:
            return await self._enqueue_parts(_recorded(remaining, built), new=True)
        except DriverUnavailableError as exc:
            if not _held_key(exc):
                raise
        self._skipping = _SKIPPING_BATCHES
        return await self._enqueue_parts(itertools.chain(built, remaining), new=False)

    async def _enqueue_parts(
        self, parts: Iterator[Sequence[EnqueueRequest]], *, new: bool
    ) -> list[EnqueueResult]:
        async with self.conn() as conn:
            tx = conn.transaction()
            # BEGIN goes out first, as the pipeline's first flight: its round trip overlaps
            # the building of the first part instead of preceding it.
            begin = asyncio.ensure_future(_begin(tx))
            try:
                results, inserted = await self._pipeline(conn, parts, begin, new=new)
            except Exception:
                # The pipeline let every statement end first; an ordinary error (a refusal)
                # rolls back and keeps the connection. A cancellation leaves that to the
                # connection's return, which closes a connection still in a transaction.
                if conn.is_in_transaction():
                    await tx.rollback()
                raise
            await tx.commit()
        if inserted:
            self.signal.notify()
        return results

    async def _pipeline(
        self,
        conn: Conn,
        parts: Iterator[Sequence[EnqueueRequest]],
        flight: asyncio.Task[tuple[dict[DedupeKey, _Holder], bool]] | None = None,
        *,
        new: bool = False,
    ) -> tuple[list[EnqueueResult], bool]:
        """Insert the parts one statement at a time, each sent before the next part is built;
        `flight` is a statement already on its way (BEGIN), awaited like a part. `new`: insert
        with `enqueue_new` (see `enqueue_parts`)."""
        now = self.clock.now_ms()
        requests: list[EnqueueRequest] = []
        first_of: dict[DedupeKey, int] = {}
        held: dict[DedupeKey, _Holder] = {}
        inserted = False
        try:
            if flight is not None:
                await asyncio.sleep(0)  # it goes out before the first part is built
            while (part := next(parts, None)) is not None:
                unique = _fold(part, len(requests), first_of)
                requests.extend(part)
                docs = _batch_json(unique, now) if unique else None
                if flight is not None:
                    more, any_in = await flight
                    held.update(more)
                    inserted = inserted or any_in
                    flight = None
                if unique:
                    flight = asyncio.ensure_future(self._insert(conn, unique, now, docs, new=new))
                    # One turn of the loop: the task sends its statement, then the next part is
                    # built while the server runs it.
                    await asyncio.sleep(0)
            if flight is not None:
                more, any_in = await flight
                held.update(more)
                inserted = inserted or any_in
        except BaseException as exc:
            if flight is not None:
                await _settle_flight(flight, cancel=not isinstance(exc, Exception))
            raise
        return _results(requests, first_of, held, now), inserted

    async def enqueue_on(
        self, conn: Conn, requests: Sequence[EnqueueRequest], *, refused: bool = False
    ) -> tuple[list[EnqueueResult], bool]:
        """Enqueue on `conn` (the outbox passes its own transaction); also says whether any row
        was inserted. With `on_conflict='error'` anywhere in the batch, a refusal must leave
        nothing behind, so the batch runs in a (nested, if need be) transaction. `refused`:
        the items were just refused by an insert, so the first statement looks for holders."""
        now = self.clock.now_ms()
        first_of: dict[DedupeKey, int] = {}
        unique = _fold(requests, 0, first_of)
        if any(r.on_conflict == "error" for r in requests):
            async with conn.transaction():
                held, inserted = await self._insert(conn, unique, now, refused=refused)
                results = _results(requests, first_of, held, now)
        else:
            held, inserted = await self._insert(conn, unique, now, refused=refused)
            results = _results(requests, first_of, held, now)
        return results, inserted

    async def _insert(
        self,
        conn: Conn,
        unique: Sequence[EnqueueRequest],
        now: int,
        docs: tuple[str, str] | None = None,
        *,
        refused: bool = False,
        new: bool = False,
    ) -> tuple[dict[DedupeKey, _Holder], bool]:
        """Insert `unique` (one item per dedupe key; `docs` is its `_batch_json`, if made
        already). Returns the live holders of the keys that were refused (a key absent from it
        went in) and whether any row was inserted. `refused`: an insert of these items has just
        inserted none of them, so the first round only looks for their holders. `new`: insert
        with `enqueue_new`, which raises on a held key instead of skipping it."""
        held: dict[DedupeKey, _Holder] = {}
        inserted = False
        pending = list(unique)
        for _ in range(_ENQUEUE_ROUNDS):
            rows_doc, shared_doc = docs or _batch_json(pending, now)
            docs = None
            if not refused:
                count = await conn.fetchval(
                    self.q["enqueue_new" if new else "enqueue"],
                    now,
                    rows_doc,
                    shared_doc,
                    self.channel,
                )
                inserted = inserted or count > 0
                if count == len(pending):
                    return held, inserted
            refused = False
            # Some rows were refused: which, and who holds their keys (one more statement, only
            # for a batch that met a live key).
            missing: list[EnqueueRequest] = []
            live = {
                row["request_id"]: row
                for row in await conn.fetch(self.q["enqueue_holders"], rows_doc, shared_doc)
            }
            for request in pending:
                holder = live.get(request.id)
                if holder is None:
                    continue  # inserted
                if holder["id"] is None:
                    missing.append(request)
                else:
                    held[dedupe_key(request)] = _Holder(
                        holder["id"], holder["run_id"], rows.job_state(holder["state"])
                    )
            if not missing:
                return held, inserted
            # Refused, yet no live row holds the key now: the holder settled after the insert.
            # The next round inserts these again (or finds a newer holder).
            pending = missing
        raise DriverUnavailableError(
            "postgres",
            f"the live row holding {pending[0].name} key {pending[0].idempotency_key!r} kept "
            f"changing through {_ENQUEUE_ROUNDS} tries",
            "mcp-jobs jobs ls --json",
        )

    # --- claim and settle ---------------------------------------------------------------------

    async def claim(
        self, worker_id: str, limit: int, lease_ms: int, queues: Sequence[str] | None = None
    ) -> list[ClaimedJob]:
        if limit <= 0 or (queues is not None and not queues):
            return []
        now = self.clock.now_ms()
        token = new_token()
        async with self.conn() as conn:
            if queues is None:
                found = await conn.fetch(self.q["claim"], now, limit, worker_id, lease_ms, token)
            else:
                found = await conn.fetch(
                    self.q["claim_queues"], now, limit, worker_id, lease_ms, token, list(queues)
                )
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
        row = _json({"id": job_id, "token": token, "output": output})
        await self._acks.submit(_Ack(job_id, token, row), job_id)

    async def _flush_acks(self, batch: Sequence[Item[_Ack]]) -> None:
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
        row = _json(
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


def _fold(
    part: Sequence[EnqueueRequest], offset: int, first_of: dict[DedupeKey, int]
) -> list[EnqueueRequest]:
    """The items of `part` (at `offset` in the batch) whose dedupe key no earlier item had;
    records where each new key first appeared."""
    unique: list[EnqueueRequest] = []
    for index, request in enumerate(part, offset):
        key = dedupe_key(request)
        if key not in first_of:
            first_of[key] = index
            unique.append(request)
    return unique


def _held_key(exc: DriverUnavailableError) -> bool:
    """Whether `exc` is `enqueue_new` meeting a key a live row holds."""
    cause = exc.__cause__
    return (
        isinstance(cause, asyncpg.UniqueViolationError) and cause.constraint_name == _DEDUPE_INDEX
    )


def _recorded(
    parts: Iterator[Sequence[EnqueueRequest]], built: list[Sequence[EnqueueRequest]]
) -> Iterator[Sequence[EnqueueRequest]]:
    """`parts`, each also kept in `built` as it is taken, so a batch can go in again."""
    for part in parts:
        built.append(part)
        yield part


async def _begin(tx: Transaction) -> tuple[dict[DedupeKey, _Holder], bool]:
    """Start `tx`, as a flight of `_pipeline`: it inserts nothing and finds no holder."""
    await tx.start()
    return {}, False


async def _settle_flight(flight: asyncio.Task[Any], *, cancel: bool) -> None:
    """Let a part's statement end before its transaction rolls back (one statement at a time
    per connection): wait for it after an error (building the next part failed), cancel it
    first when the batch itself was cancelled. Its own outcome no longer matters; reading it
    keeps asyncio quiet."""
    if not flight.done():
        if cancel:
            flight.cancel()
        await asyncio.wait({flight})
    if not flight.cancelled():
        flight.exception()


def _json(value: Any) -> str:
    """JSON text of a request's parts (inputs the client already dumped in JSON mode, ids,
    keys, numbers) and of an ack's or a step's write (outputs already round-tripped through
    JSON): pydantic-core writes it in a fraction of `json.dumps`' time, which every enqueue and
    every settle pays once per job. Anything it declines (a lone surrogate) goes the standard
    way, for the server to judge as before."""
    try:
        return to_json(value).decode()
    except PydanticSerializationError:
        return json.dumps(value)


def _batch_json(requests: Sequence[EnqueueRequest], now: int) -> tuple[str, str]:
    """The batch as the enqueue query reads it: one short array per row, and the columns rows
    share (one job, one instant, one caller) once per distinct combination."""
    shared: dict[tuple[Any, ...], int] = {}
    rows_out: list[tuple[Any, ...]] = []
    for r in requests:
        common = (
            r.name,
            r.queue,
            r.tenant_id,
            r.initial_state(now),
            r.run_at,
            r.max_attempts,
            r.timeout_ms,
            r.traceparent,
            r.enqueued_by,
        )
        index = shared.get(common)
        if index is None:
            index = shared[common] = len(shared)
        rows_out.append((r.id, r.run_id, r.idempotency_key, r.input, index))
    return _json(rows_out), _json(list(shared))


def _inserted(request: EnqueueRequest, now: int) -> EnqueueResult:
    return EnqueueResult(request.id, request.run_id, False, request.initial_state(now))


def _results(
    requests: Sequence[EnqueueRequest],
    first_of: dict[DedupeKey, int],
    held: dict[DedupeKey, _Holder],
    now: int,
) -> list[EnqueueResult]:
    """One result per request, in order; the first refusal in order raises (as memory does)."""
    if not held and len(first_of) == len(requests):
        # Every item went in as its own job: the common batch, answered without lookups.
        return [_inserted(request, now) for request in requests]
    results: list[EnqueueResult] = []
    for index, request in enumerate(requests):
        key = dedupe_key(request)
        first = first_of[key]
        holder = held.get(key)
        if holder is None:
            if first == index:
                results.append(_inserted(request, now))
                continue
            # Held by an earlier item of this batch, which went in.
            earlier = requests[first]
            holder = _Holder(earlier.id, earlier.run_id, earlier.initial_state(now))
        if request.on_conflict == "error":
            raise JobDuplicateError(
                request.name, request.idempotency_key, holder.id, request.tenant_id
            )
        results.append(EnqueueResult(holder.id, holder.run_id, True, holder.state))
    return results
