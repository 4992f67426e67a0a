"""Enqueue over PostgreSQL: one item, a batch in one statement, a large batch in parts.

Rule 2 (one live job per dedupe key) holds in SQL: every insert arbitrates on
jobs_dedupe_live_idx, and a refused item learns its holder from `enqueue_holders`. Items with
one key within a batch are folded here first, so no two rows of one statement collide.
"""

from __future__ import annotations

import asyncio
import itertools
import operator
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, NamedTuple

import asyncpg

from engine import rules
from engine.clock import Clock
from engine.driver_errors import DriverUnavailableError
from engine.drivers.postgres import rows
from engine.drivers.postgres.connections import Connections
from engine.drivers.postgres.faults import DEDUPE_INDEX, is_retried
from engine.drivers.postgres.schema_version import Conn
from engine.drivers.postgres.wake import WakeSignal
from engine.errors import JobDuplicateError
from engine.rules import DedupeKey
from schemas.jobs import EnqueueRequest, EnqueueResult
from schemas.states import JobState

# How many inserts enqueue spends on items whose holder settled between statements.
_ENQUEUE_ROUNDS = 5
# `enqueue_new` is kept because batch enqueue runs about 9% faster with it (benchmarks/README.md).
# After a large batch met a held key, how many large batches go straight to the insert that
# skips held keys: a caller enqueuing keys again (a backfill run twice) pays for the failed try
# once in this many batches, not in every one.
_SKIPPING_BATCHES = 32


def dedupe_key(request: EnqueueRequest) -> DedupeKey:
    return rules.dedupe_key(request.name, request.tenant_id, request.idempotency_key)


class _Holder(NamedTuple):
    """The live row that holds a dedupe key an insert was refused for."""

    id: str
    run_id: str
    state: JobState


class Enqueuer:
    """Enqueue over `db`; an insert that went in wakes `signal` (this process's waiters)."""

    def __init__(self, db: Connections, signal: WakeSignal, clock: Clock) -> None:
        self.db = db
        self.q = db.q
        self.channel = db.channel
        self.signal = signal
        self.clock = clock
        # Large batches left to insert skipping held keys before one expects all-new keys again.
        self._skipping = 0

    async def enqueue(
        self, requests: Sequence[EnqueueRequest], *, now: int | None = None
    ) -> list[EnqueueResult]:
        if not requests:
            return []
        if now is None:
            now = self.clock.now_ms()
        broke = False
        if len(requests) == 1:
            try:
                async with self.db.conn() as conn:
                    one = await self._insert_one(conn, requests[0], now)
            except DriverUnavailableError as exc:
                if not self.db.retry.deadline_ms or not is_retried(exc):
                    raise
                one, broke = None, True
            if one is not None:
                self.signal.notify()
                return [one]

        async def once(first: bool) -> tuple[list[EnqueueResult], bool]:
            # A single item that was refused goes straight to finding its holder, and so does
            # every item after a broken try, which may have committed: the caller's own row is
            # told from a holder by id (enqueue_holders) and answered as inserted, not deduped.
            refused = len(requests) == 1 or broke or not first
            async with self.db.conn() as conn:
                return await self.enqueue_on(conn, requests, refused=refused, now=now)

        # Safe to repeat: every item carries its id and dedupes by its key.
        results, inserted = await self.db.retry.retrying(once)
        if inserted or broke:
            self.signal.notify()
        return results

    async def _insert_one(self, conn: Conn, r: EnqueueRequest, now: int) -> EnqueueResult | None:
        """The single-item fast road, at `now`: the result when the row went in; None when its
        key is held (nothing was written)."""
        found = await conn.fetch(
            self.q["enqueue_one"],
            now,
            r.id,
            r.run_id,
            r.name,
            r.queue,
            r.tenant_id,
            r.idempotency_key,
            rows.json_text(r.input),
            r.initial_state(now),
            r.max_attempts,
            r.run_at,
            r.timeout_ms,
            r.traceparent,
            r.enqueued_by,
            self.channel,
            r.priority,
        )
        return _inserted(r, now) if found else None

    async def enqueue_parts(
        self, parts: Iterable[Sequence[EnqueueRequest]], *, now: int | None = None
    ) -> list[EnqueueResult]:
        """A large batch, one transaction, inserted part by part as the caller builds it: the
        server inserts one part while this process validates the next, so the two costs
        overlap instead of adding up. A refusal (an invalid item, or a duplicate under
        `on_conflict='error'`) rolls the whole batch back and comes out unchanged.

        The batch first goes in expecting every key to be new (`enqueue_new`). A held key
        fails that statement and rolls the batch back; it then goes in again, parts already
        built first, with the insert that skips held keys, which the next `_SKIPPING_BATCHES`
        batches also take."""
        # The caller's instant, read before any part is built: a later reading here made
        # run_at (resolved at the caller's) look 1 ms ahead, and the batch went in delayed.
        if now is None:
            now = self.clock.now_ms()
        built: list[Sequence[EnqueueRequest]] = []
        remaining = _recorded(iter(parts), built)

        async def once(first: bool) -> list[EnqueueResult]:
            if not first:
                # After a broken try (which may have committed), what was built goes again and
                # each statement first looks for the caller's own rows (see `enqueue`).
                again = itertools.chain(list(built), remaining)
                return await self._enqueue_parts(again, new=False, now=now, refused=True)
            if self._skipping:
                self._skipping -= 1
                return await self._enqueue_parts(remaining, new=False, now=now)
            try:
                return await self._enqueue_parts(remaining, new=True, now=now)
            except DriverUnavailableError as exc:
                if not _held_key(exc):
                    raise
            self._skipping = _SKIPPING_BATCHES
            again = itertools.chain(list(built), remaining)
            return await self._enqueue_parts(again, new=False, now=now)

        return await self.db.retry.retrying(once)

    async def _enqueue_parts(
        self,
        parts: Iterator[Sequence[EnqueueRequest]],
        *,
        new: bool,
        now: int,
        refused: bool = False,
    ) -> list[EnqueueResult]:
        async with self.db.conn() as conn:
            tx = conn.transaction()
            await tx.start()
            try:
                results, inserted = await self._pipeline(
                    conn, parts, new=new, now=now, refused=refused
                )
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
        *,
        new: bool = False,
        now: int,
        refused: bool = False,
    ) -> tuple[list[EnqueueResult], bool]:
        """Insert the parts one statement at a time, each sent before the next part is built.
        `new`: insert with `enqueue_new` (see `enqueue_parts`); `refused`: look for holders
        first (`_insert`)."""
        requests: list[EnqueueRequest] = []
        first_of: dict[DedupeKey, int] = {}
        held: dict[DedupeKey, _Holder] = {}
        inserted = False
        flight: asyncio.Task[tuple[dict[DedupeKey, _Holder], bool]] | None = None
        try:
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
                    flight = asyncio.ensure_future(
                        self._insert(conn, unique, now, docs, new=new, refused=refused)
                    )
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
        self,
        conn: Conn,
        requests: Sequence[EnqueueRequest],
        *,
        refused: bool = False,
        now: int | None = None,
    ) -> tuple[list[EnqueueResult], bool]:
        """Enqueue on `conn` (the outbox passes its own transaction); also says whether any row
        was inserted. With `on_conflict='error'` anywhere in the batch, a refusal must leave
        nothing behind, so the batch runs in a (nested, if need be) transaction. `refused`:
        the items were just refused by an insert, so the first statement looks for holders.
        `now`: the caller's instant (see `enqueue`), else the clock's."""
        if now is None:
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


def _fold(
    part: Sequence[EnqueueRequest], offset: int, first_of: dict[DedupeKey, int]
) -> list[EnqueueRequest]:
    """The items of `part` (at `offset` in the batch) whose dedupe key no earlier item had;
    records where each new key first appeared."""
    unique: list[EnqueueRequest] = []
    key_of = rules.dedupe_key  # bound once: a thousand items a call
    for index, request in enumerate(part, offset):
        key = key_of(request.name, request.tenant_id, request.idempotency_key)
        if key not in first_of:
            first_of[key] = index
            unique.append(request)
    return unique


def _held_key(exc: DriverUnavailableError) -> bool:
    """Whether `exc` is `enqueue_new` meeting a key a live row holds."""
    cause = exc.__cause__
    return isinstance(cause, asyncpg.UniqueViolationError) and cause.constraint_name == DEDUPE_INDEX


def _recorded(
    parts: Iterator[Sequence[EnqueueRequest]], built: list[Sequence[EnqueueRequest]]
) -> Iterator[Sequence[EnqueueRequest]]:
    """`parts`, each also kept in `built` as it is taken, so a batch can go in again."""
    for part in parts:
        built.append(part)
        yield part


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


def _batch_json(requests: Sequence[EnqueueRequest], now: int) -> tuple[str, str]:
    """The batch as the enqueue query reads it: one short array per row, and the columns rows
    share (one job, one instant, one caller) once per distinct combination."""
    # A combination is told by the columns read in C (`_COMMON`); its state follows from its
    # run_at at this one `now`, so it is read once per combination, from its first request.
    shared: dict[tuple[Any, ...], int] = {}
    firsts: list[EnqueueRequest] = []
    rows_out: list[tuple[Any, ...]] = []
    for r in requests:
        common = _COMMON(r)
        index = shared.get(common)
        if index is None:
            index = shared[common] = len(firsts)
            firsts.append(r)
        rows_out.append((r.id, r.run_id, r.idempotency_key, r.input, index))
    shared_out = [
        (*common[:3], first.initial_state(now), *common[3:])
        for common, first in zip(shared, firsts, strict=True)
    ]
    return rows.json_text(rows_out), rows.json_text(shared_out)


# The columns `_batch_json` shares, in the enqueue statement's order less `state` (4th).
_COMMON = operator.attrgetter(
    "name",
    "queue",
    "tenant_id",
    "run_at",
    "max_attempts",
    "timeout_ms",
    "traceparent",
    "enqueued_by",
    "priority",
)


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
