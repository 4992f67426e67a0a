"""Enqueue with dedupe (rules 2, 3) over a create-only index key per (name, tenant or '', key).

An enqueue first creates `dd.<digest>` (`kv.create`: it fails when the key exists), holding
the new job's id and its whole document, then creates the job's own key. Of 50 racing enqueues
of one key exactly one create succeeds; the others read the index, find a live holder and
answer it as deduped. The document in the index is the enqueue's intent: a racer that finds the
index but no job (its creator died between the two writes, or is about to write) creates the
job from it (create-only again, so it happens once), so a dedupe never answers an id that will
not exist. The roll-forward expects no message at all on the job's key, so an intent read just
before retention removed its job never brings that job back. An index key whose job has settled
(or been pruned) is stale: it is deleted by compare-and-set on its revision and the create is
tried again; a settle leaves it to be cleared so (one write per settle, not three).

A batch is atomic as far as a keyed store allows: every `on_conflict='error'` item is checked
before anything is written, and a duplicate that appears between that check and the write
(another process's enqueue) removes this batch's unclaimed jobs again before raising. A store
that fills up mid-batch refuses the rest: what the batch wrote is taken back (`Store.take_back`,
which a full server still accepts) before STORAGE_FULL is raised, an index key left without its
job included, so no intent of a refused enqueue is ever rolled forward.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from functools import partial

import pydantic_core

from engine.drivers.base import RecordNeeds
from engine.drivers.damage import or_none
from engine.drivers.nats import keys
from engine.drivers.nats.codec import JobDoc, decode_doc, dumps, encode_doc, loads
from engine.drivers.nats.connection import INPUT_ROOM, storage_full
from engine.drivers.nats.max_payload import (
    DEFAULT_MAX_PAYLOAD,
    README_BOUND,
    SERVER_CEILING,
    needed,
    record_needs,
    set_line,
)
from engine.drivers.nats.store import MAX_CONFLICTS, Store
from engine.errors import InvalidArgumentError, JobDuplicateError
from engine.rules import LIVE_STATES, DedupeKey, dedupe_key, new_record
from schemas.jobs import EnqueueRequest, EnqueueResult, JobRecord

# In-flight writes of one batch: enough to hide round trips, few enough to stay polite.
PARALLEL = 32


class Duplicate(Exception):
    def __init__(self, holder: JobRecord) -> None:
        self.holder = holder


async def live_holder(store: Store, key: DedupeKey) -> JobRecord | None:
    """The live job holding `key` now, from the server (rolling its intent forward first)."""
    entry = await store.fresh(keys.dedupe(key))
    if entry is None:
        return None
    holder = await _holder(store, key, entry.raw)
    return holder if holder is not None and holder.state in LIVE_STATES else None


async def _holder(store: Store, key: DedupeKey, raw: bytes) -> JobRecord | None:
    dkey = keys.dedupe(key)
    intent = _intent(dkey, raw)
    if intent is None:
        return await _live_job_of(store, key)
    job_id, base, doc = intent
    held = await store.fresh_doc(job_id)
    if (held is None and base == 0) or (held is not None and held[0] == base):
        # The intent's writer has not written the job yet (or died first): roll it forward.
        # A CAS on the same base revision, so of several racers one writes it.
        written = or_none(partial(decode_doc, doc.encode()), f"dedupe key {dkey!r}")
        if written is None:
            return None
        await store.write_doc(written, base, strict=True)
        held = await store.fresh_doc(job_id)
    return None if held is None else held[1].record


async def _live_job_of(store: Store, key: DedupeKey) -> JobRecord | None:
    """The live job of `key`, found without its index (a walk of every live job): the index
    key's value cannot be read, and a job may still hold the key."""
    await store.replica.sync()
    for doc in list(store.replica.live.values()):
        record = doc.record
        if dedupe_key(record.name, record.tenant_id, record.idempotency_key) == key:
            return record
    return None


def _intent(dkey: str, raw: bytes) -> tuple[str, int, str] | None:
    """A dedupe key's value: its job's id, the job's base revision and its document. One
    another program wrote names no holder (logged once): the key's live job, if one is left, is
    found without it (`_live_job_of`); with none, the key is stale, like one whose job is gone:
    the next enqueue of the key replaces it, and a settle leaves it be."""

    def read() -> tuple[str, int, str]:
        data = loads(raw)
        job_id, base, doc = data["id"], data["base"], data["doc"]
        if not (isinstance(job_id, str) and isinstance(base, int) and isinstance(doc, str)):
            raise TypeError(f"an intent of {type(job_id).__name__}, {type(base).__name__}")
        return job_id, base, doc

    return or_none(read, f"dedupe key {dkey!r}")


class Moved(Exception):
    """The job changed between the read a requeue was computed from and its write."""


async def take_key(
    store: Store,
    key: DedupeKey,
    doc: JobDoc,
    base: int,
    written: list[tuple[str, int]] | None = None,
    encoded: Encoded | None = None,
) -> JobRecord:
    """Make `doc`'s job the live holder of `key` and write `doc` over revision `base` (0: a new
    job): create the index key holding `doc` as the intent, or clear a stale one and try again.
    Raises `Duplicate` with another live holder, `Moved` when the job changed since `base`.
    `written` is told each (key, revision) written, for a batch that must take them back.
    `encoded`: `doc` and its intent as `encode` made them (a new job's, already measured)."""
    written = [] if written is None else written
    dkey = keys.dedupe(key)
    job_id = doc.record.id
    raw, value = encoded or encode(doc, base)
    for _ in range(MAX_CONFLICTS):
        mine = await store.write(dkey, value, 0)
        if mine is not None:
            written.append((dkey, mine))
            new = await store.write_doc(doc, base)
            if new is None:
                now = await store.fresh_doc(job_id)
                if now is None or encode_doc(now[1]) != raw:  # not rolled forward by a racer
                    await store.delete(dkey, mine)
                    raise Moved
            else:
                written.append((keys.job(job_id), new))
            return doc.record
        entry = await store.fresh(dkey)
        if entry is None:
            continue
        holder = await _holder(store, key, entry.raw)
        if holder is not None and holder.state in LIVE_STATES:
            if holder.id != job_id:
                raise Duplicate(holder)
            now = await store.fresh_doc(job_id)
            if base == 0 or (now is not None and encode_doc(now[1]) == raw):
                return holder  # our own intent, rolled forward by a racer
            raise Moved  # another requeue of this job got there first
        await store.delete(dkey, entry.revision)
    raise store.contended(dkey)


# The smallest input there is (`{}`): a bound below it holds no job at all.
SMALLEST_INPUT = 2

# A job document as stored, and its dedupe key's value (the intent) naming it.
Encoded = tuple[bytes, bytes]


def encode(doc: JobDoc, base: int) -> Encoded:
    """`doc` as stored, and the intent a dedupe key holds for it: the job's id and base
    revision, and its document as a string."""
    raw = encode_doc(doc)
    return raw, dumps({"id": doc.record.id, "doc": raw.decode(), "base": base})


def input_fit(store: Store, request: EnqueueRequest, encoded: Encoded) -> tuple[int, int] | None:
    """None when the job's value (kept `INPUT_ROOM` short, for its steps, output and errors)
    and its dedupe key's can be written; else the largest input (bytes of JSON) this server
    takes for the job, and the max_payload that takes this one as it is."""
    raw, value = encoded
    over = max(len(raw) - store.bound(INPUT_ROOM), len(value) - store.bound())
    if over <= 0:
        return None
    size = len(pydantic_core.to_json(request.input))
    # Each byte of input costs at least one stored byte: this much less always fits.
    bound = max(0, size - over)
    return bound, max(needed(len(raw), INPUT_ROOM), needed(len(value)))


def input_needs(store: Store, request: EnqueueRequest, now: int) -> RecordNeeds | None:
    """What `request`'s job needs of this server's max_payload (engine.drivers.base
    `RecordBounds`): asked where the engine's own bound refused its input."""
    fit = input_fit(store, request, encode(JobDoc(new_record(request, now)), 0))
    return None if fit is None else record_needs(*fit, store.client.max_payload)


def check_fits(store: Store, request: EnqueueRequest, encoded: Encoded) -> None:
    """INVALID_ARGUMENT naming the input bound this server takes, when the job's value or its
    dedupe key's could not be written (`input_fit`)."""
    fit = input_fit(store, request, encoded)
    if fit is None:
        return
    bound, wanted = fit
    size = len(pydantic_core.to_json(request.input))
    if bound < SMALLEST_INPUT and wanted <= SERVER_CEILING:
        raise _holds_no_job(store, size, max(wanted, DEFAULT_MAX_PAYLOAD))
    error = InvalidArgumentError(
        "input",
        f"{size} bytes of JSON",
        f"at most {bound} bytes of JSON for job {request.name!r} on this NATS server "
        f"(its max_payload is {store.client.max_payload} bytes; {README_BOUND})",
        fix=f"send an input of at most {bound} bytes of JSON"
        + (f", or {set_line(wanted)}" if wanted <= SERVER_CEILING else ""),
    )
    error.details = {**(error.details or {}), "bound": bound, "max_payload": wanted}
    raise error


def _holds_no_job(store: Store, size: int, wanted: int) -> InvalidArgumentError:
    """The refusal where this server's max_payload holds no job's value at all: "an input of at
    most 0 bytes" would be a fix no input follows, so the fix is the max_payload alone."""
    error = InvalidArgumentError(
        "input",
        f"{size} bytes of JSON",
        f"within what this NATS server holds, and it holds no job: its max_payload, "
        f"{store.client.max_payload} bytes, is less than one job's value with the {INPUT_ROOM} "
        f"bytes each keeps free for its steps, output and settles ({README_BOUND})",
        fix=set_line(wanted),
    )
    error.details = {**(error.details or {}), "bound": 0, "max_payload": wanted}
    return error


async def free_key(store: Store, record: JobRecord) -> None:
    """Delete the index key if it still names this (settled) job: its key is free again."""
    dkey = keys.dedupe(dedupe_key(record.name, record.tenant_id, record.idempotency_key))
    entry = await store.fresh(dkey)
    intent = None if entry is None else _intent(dkey, entry.raw)
    if entry is not None and intent is not None and intent[0] == record.id:
        await store.delete(dkey, entry.revision)


async def enqueue(
    store: Store, requests: Sequence[EnqueueRequest], now: int
) -> list[EnqueueResult]:
    planned: dict[DedupeKey, EnqueueRequest] = {}
    order: list[tuple[DedupeKey, EnqueueRequest]] = []
    for request in requests:
        key = dedupe_key(request.name, request.tenant_id, request.idempotency_key)
        earlier = planned.get(key)
        if earlier is not None and request.on_conflict == "error":
            raise JobDuplicateError(
                request.name, request.idempotency_key, earlier.id, request.tenant_id
            )
        planned.setdefault(key, request)
        order.append((key, request))
    # Each new job encoded once, and measured before anything is written: the batch is refused
    # whole.
    docs = {r.id: JobDoc(new_record(r, now)) for r in planned.values()}
    encoded = {job_id: encode(doc, 0) for job_id, doc in docs.items()}
    for request in planned.values():
        check_fits(store, request, encoded[request.id])
    for key, request in planned.items():
        if request.on_conflict == "error":
            holder = await live_holder(store, key)
            if holder is not None:
                raise JobDuplicateError(
                    request.name, request.idempotency_key, holder.id, request.tenant_id
                )
    gate = asyncio.Semaphore(PARALLEL)
    written: dict[str, list[tuple[str, int]]] = {}

    async def place(request: EnqueueRequest) -> EnqueueResult:
        doc = docs[request.id]
        async with gate:
            try:
                mine = written.setdefault(request.id, [])
                record = await take_key(store, key_of(request), doc, 0, mine, encoded[request.id])
            except Duplicate as dup:
                held = dup.holder
                return EnqueueResult(id=held.id, run_id=held.run_id, deduped=True, state=held.state)
            except Moved:
                # This job id is stored already (an outbox row published twice): answer it.
                got = await store.fresh_doc(request.id)
                if got is None:
                    raise
                held = got[1].record
                return EnqueueResult(id=held.id, run_id=held.run_id, deduped=True, state=held.state)
        return EnqueueResult(id=record.id, run_id=record.run_id, deduped=False, state=record.state)

    # Every place ends before a failure is raised: a refused batch takes back all it wrote.
    outcomes = await asyncio.gather(*(place(r) for r in planned.values()), return_exceptions=True)
    failed = [o for o in outcomes if isinstance(o, BaseException)]
    if failed:
        if any(storage_full(exc) for exc in failed):
            for writes in written.values():
                await _take_back(store, writes)
        raise next((exc for exc in failed if storage_full(exc)), failed[0])
    placed = [o for o in outcomes if not isinstance(o, BaseException)]
    by_key = dict(zip(planned, placed, strict=True))
    clash = next(
        (r for k, r in planned.items() if r.on_conflict == "error" and by_key[k].deduped), None
    )
    if clash is not None:
        await _undo(store, [res for res in placed if not res.deduped])
        holder_id = by_key[key_of(clash)].id
        raise JobDuplicateError(clash.name, clash.idempotency_key, holder_id, clash.tenant_id)
    results: list[EnqueueResult] = []
    for key, request in order:
        first = by_key[key]
        if request is planned[key]:
            results.append(first)
        else:
            results.append(first._replace(deduped=True))
    return results


def key_of(request: EnqueueRequest) -> DedupeKey:
    return dedupe_key(request.name, request.tenant_id, request.idempotency_key)


async def _take_back(store: Store, writes: list[tuple[str, int]]) -> None:
    """Take back one request's writes, its job before its index key: a job a worker claimed
    meanwhile stays, and so does the key that indexes it."""
    for key, revision in reversed(writes):
        if not await store.take_back(key, revision):
            return


async def _undo(store: Store, created: list[EnqueueResult]) -> None:
    """Remove this batch's jobs that no worker has claimed yet, with their index keys."""
    for result in created:
        held = await store.fresh_doc(result.id)
        if held is None or held[1].record.attempt > 0:
            continue
        await free_key(store, held[1].record)
        await store.delete(keys.job(result.id), held[0])
