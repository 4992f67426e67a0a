"""Claims and settles: each one compare-and-set on the job document, fenced by its token.

A claim syncs the replica (every write the stream held is applied), walks the live jobs in
`rules.claim_rank` order, and takes each candidate with a CAS on the revision it read: two
workers racing for one job both write against the same revision and exactly one wins; the loser
moves on to the next candidate. A settle (ack, nack) checks the held token and state inside the
transition and retries from a fresh read on a conflict, so a stale holder always gets
JOB_SLOT_LOST and never writes.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Sequence

from engine.drivers.base import AckWrite
from engine.drivers.nats import keys, slots
from engine.drivers.nats.codec import JobDoc
from engine.drivers.nats.connection import SETTLE_ROOM, TooLarge
from engine.drivers.nats.pauses import paused
from engine.drivers.nats.store import Store, Unchanged
from engine.errors import JobsError, JobSlotLostError
from engine.ids import new_token
from engine.lease_expiry import lease_expired_event
from engine.pauses import is_held
from engine.rules import (
    ack_transition,
    apply_nack,
    claim_rank,
    claim_transition,
    event_kind_for,
    is_claimable,
    is_excluded,
    nack_event_data,
)
from schemas.errors import ErrorPayload
from schemas.events import EventRecord
from schemas.jobs import ClaimedJob, ClaimExclusion, HeartbeatResult, JobRecord, NackOptions

logger = logging.getLogger(__name__)

# Candidates tried at once per round of a claim: a lost race costs one more round, not a stall.
PARALLEL = 16


def held(doc: JobDoc | None, job_id: str, token: str, *, running: bool = True) -> JobDoc:
    """The document if `token` holds the job (running, unless `running=False`)."""
    if doc is None or doc.token != token:
        raise JobSlotLostError(job_id)
    if running and doc.record.state != "running":
        raise JobSlotLostError(job_id)
    return doc


async def claim(
    store: Store,
    worker_id: str,
    limit: int,
    lease_ms: int,
    queues: Sequence[str] | None,
    excluding: ClaimExclusion | None = None,
) -> list[ClaimedJob]:
    await store.replica.sync()
    now = store.clock.now_ms()
    wanted = set(queues) if queues is not None else None
    holds = paused(store)
    # After an outage, running jobs keep their leases one lease longer: holders that lived
    # through it reach the server again, write their held settles and heartbeat.
    outage = store.log.outage_seen
    take_over = not outage and now >= store.take_over_from
    candidates = sorted(
        (
            doc.record
            for doc in store.replica.live.values()
            if (wanted is None or doc.record.queue in wanted)
            and is_claimable(doc.record, now)
            and (take_over or doc.record.state != "running")
            and not (holds and is_held(doc.record, holds))
            and not is_excluded(doc.record, excluding)
        ),
        key=claim_rank,
    )
    if outage:
        store.log.outage_seen = False
        store.take_over_from = now + lease_ms
    claimed: list[ClaimedJob] = []
    pending = iter(candidates)
    while len(claimed) < limit:
        batch = list(itertools.islice(pending, min(PARALLEL, limit - len(claimed))))
        if not batch:
            break
        taken = await asyncio.gather(
            *(_take(store, job, worker_id, now, lease_ms) for job in batch)
        )
        claimed.extend(t for t in taken if t is not None)
    return claimed


async def _take(
    store: Store, job: JobRecord, worker_id: str, now: int, lease_ms: int
) -> ClaimedJob | None:
    held_doc = store.replica.doc(keys.job(job.id))
    if held_doc is None or held_doc[1].record != job:
        return None
    revision, doc = held_doc
    token = new_token()
    record = claim_transition(doc.record, worker_id, now, lease_ms)
    taken = doc.with_record(record, token)
    # Taken over from a lease that ran out: the attempt lost is told in the same write.
    lost = lease_expired_event(doc.record, worker_id, now)
    try:
        written = await store.write_doc(taken if lost is None else taken.with_event(lost), revision)
    except TooLarge as exc:
        if lost is None:
            raise
        # A document at the payload's bound has no room for the event: the job is still taken
        # over (rule 13), only its history misses that line.
        logger.warning("nats: job %s taken over without its %s event: %s", job.id, lost.kind, exc)
        written = await store.write_doc(taken, revision)
    if written is None:
        # Another worker (or an operator) moved it first; or it was purged, which no watch
        # reports: the read takes the new value, or drops the key, before the next claim.
        await store.fresh(keys.job(job.id))
        return None
    has_steps = record.attempt > 1 or bool(doc.steps.get(record.run_id))
    return ClaimedJob(
        record=record, token=token, lease_expires_at=now + lease_ms, has_steps=has_steps
    )


async def heartbeat(store: Store, job_id: str, token: str, lease_ms: int) -> HeartbeatResult:
    now = store.clock.now_ms()
    expires = now + lease_ms

    def extend(doc: JobDoc | None) -> JobDoc:
        current = held(doc, job_id, token, running=False)
        if current.record.state == "cancelled":
            raise Unchanged
        if current.record.state != "running":
            raise JobSlotLostError(job_id)
        return current.with_record(
            current.record.model_copy(update={"lease_expires_at": expires}), token
        )

    _, after = await store.change_doc(job_id, extend)
    if after.record.state == "cancelled":
        return HeartbeatResult(
            lease_expires_at=after.record.lease_expires_at or 0, cancel_requested=True
        )
    await slots.extend_slots(store, job_id, expires)
    return HeartbeatResult(lease_expires_at=expires, cancel_requested=False)


def landed(doc: JobDoc | None, token: str, again: bool) -> bool:
    """Whether the settle by `token` is already there, on a try after one that may have landed
    (`again`): its reply was lost, and the try answers as that one did."""
    return again and doc is not None and doc.settled_by == token


async def ack_many(
    store: Store, writes: Sequence[AckWrite], again: bool = False
) -> list[JobsError | None]:
    now = store.clock.now_ms()

    async def ack(write: AckWrite) -> JobsError | None:
        def done(doc: JobDoc | None) -> JobDoc:
            if landed(doc, write.token, again) and doc and doc.record.state == "done":
                raise Unchanged
            current = held(doc, write.job_id, write.token)
            return current.settled(ack_transition(current.record, now, write.output), write.token)

        try:
            _, after = await store.change_doc(write.job_id, done, fresh=again, room=SETTLE_ROOM)
        except JobsError as exc:
            return exc
        except TooLarge as exc:
            return exc.output_refused(write.job_id, "the job")
        await handed_back(store, after.record)
        return None

    return list(await asyncio.gather(*(ack(w) for w in writes)))


async def nack(
    store: Store, job_id: str, token: str, options: NackOptions, again: bool = False
) -> JobRecord:
    now = store.clock.now_ms()

    def back(doc: JobDoc | None) -> JobDoc:
        if landed(doc, token, again):
            raise Unchanged
        current = held(doc, job_id, token)
        record = apply_nack(current.record, options, now)
        after = current.settled(record, token)
        kind = event_kind_for(options)
        if kind is not None:
            data = nack_event_data(options, current.record.attempt, record.run_at)
            after = after.with_event(event(current.record, kind, now, data))
        return after

    try:
        _, after = await store.change_doc(job_id, back, fresh=again)
    except TooLarge:
        # The job's value cannot hold this error's text too: stored cut, so the job still
        # settles (left running, it would be run again at every lease's end).
        options = options.model_copy(update={"error": _cut(options.error)})
        _, after = await store.change_doc(job_id, back, fresh=True)
    await handed_back(store, after.record)
    return after.record


# What a nack's error keeps of its text when the whole of it does not fit the job's value.
CUT_ERROR_CHARS = 4096


def _cut(error: ErrorPayload | None) -> ErrorPayload | None:
    if error is None:
        return None
    cause, fix = error.cause, error.fix
    return error.model_copy(
        update={
            "cause": cause if len(cause) <= CUT_ERROR_CHARS else cause[:CUT_ERROR_CHARS] + "…",
            "fix": fix if len(fix) <= CUT_ERROR_CHARS else fix[:CUT_ERROR_CHARS] + "…",
            "details": None,
        }
    )


async def handed_back(store: Store, record: JobRecord) -> None:
    """After a holder let go: its slots released. A settled job's dedupe key is left in place:
    an index key naming a settled job is stale and the next enqueue of that key clears it
    (enqueue.py), so a settle costs one write, and retention deletes it with the job."""
    await slots.release_slots(store, record.id)


def event(
    job: JobRecord, kind: str, now: int, data: dict[str, object] | None, actor: str | None = None
) -> EventRecord:
    return EventRecord(
        job_id=job.id, at=now, kind=kind, actor=actor, tenant_id=job.tenant_id, data=data
    )
