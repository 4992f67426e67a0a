"""Operator transitions (cancel, retry) and recorded events: guarded by the row's write counter,
so a claim or a settle landing between the read and the write makes the transition read again."""

from __future__ import annotations

from engine.drivers.redis.codec import decode_record, dedupe_field
from engine.drivers.redis.store import MOVED_RETRIES, Store, Write
from engine.drivers.redis.transitions import event, transition
from engine.errors import (
    JobDuplicateError,
    JobNotCancellableError,
    JobNotFoundError,
    JobNotRetryableError,
)
from engine.rules import (
    can_cancel,
    can_retry,
    cancel_event_data,
    cancel_transition,
    retry_event_data,
    retry_transition,
)
from schemas.events import EventRecord
from schemas.jobs import JobRecord


async def find(store: Store, job_id: str, tenant_id: str | None) -> tuple[JobRecord, str]:
    """The record (rule 4: another tenant's is not found) and its write counter."""
    fields = await store.hgetall(store.keys.job(job_id))
    if not fields:
        raise JobNotFoundError(job_id, tenant_id)
    record = decode_record(fields)
    if tenant_id is not None and record.tenant_id != tenant_id:
        raise JobNotFoundError(job_id, tenant_id)
    return record, fields.get("ver", "")


async def cancel(store: Store, job_id: str, tenant_id: str | None, actor: str | None) -> JobRecord:
    keys = store.keys
    for _ in range(MOVED_RETRIES):
        job, ver = await find(store, job_id, tenant_id)
        if not can_cancel(job.state):
            raise JobNotCancellableError(job_id, job.state)
        now = store.clock.now_ms()
        record = cancel_transition(job, now)
        w = transition(keys, job, record)
        w.guard_eq(keys.job(job_id), "ver", ver)
        if not record.cancel_requested:
            w.op("HDEL", keys.job(job_id), "token")  # a running holder keeps it to hear the cancel
        event(w, keys, _event(job, "cancelled", now, cancel_event_data(job.state), actor))
        if await store.apply(w) >= 0:
            return record
    raise JobNotCancellableError(job_id, job.state)


async def retry(
    store: Store, job_id: str, tenant_id: str | None, include_cancelled: bool, actor: str | None
) -> JobRecord:
    keys = store.keys
    for _ in range(MOVED_RETRIES):
        job, ver = await find(store, job_id, tenant_id)
        if not can_retry(job.state, include_cancelled):
            raise JobNotRetryableError(job_id, job.state)
        dedupe = dedupe_field(job.name, job.tenant_id, job.idempotency_key)
        holder = await store.hget(keys.dedupe, dedupe)
        if holder is not None and holder != job_id:
            raise JobDuplicateError(job.name, job.idempotency_key, holder, job.tenant_id)
        now = store.clock.now_ms()
        record = retry_transition(job, now)
        w = transition(keys, job, record)
        w.guard_eq(keys.job(job_id), "ver", ver)
        w.guard_absent_or(keys.dedupe, dedupe, job_id)
        w.op("HDEL", keys.job(job_id), "token")
        event(w, keys, _event(job, "requeued", now, retry_event_data(job.state), actor))
        if await store.apply(w) >= 0:
            store.wake.notify()
            return record
    raise JobNotRetryableError(job_id, job.state)


async def record_event(store: Store, record: EventRecord) -> None:
    w = Write()
    event(w, store.keys, record)
    await store.apply(w)


def _event(
    job: JobRecord, kind: str, now: int, data: dict[str, object], actor: str | None
) -> EventRecord:
    return EventRecord(
        job_id=job.id, at=now, kind=kind, actor=actor, tenant_id=job.tenant_id, data=data
    )
