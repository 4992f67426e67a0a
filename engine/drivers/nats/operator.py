"""Operator actions on one job: cancel, retry (requeue), and events recorded beside it."""

from __future__ import annotations

from engine.drivers.nats import keys
from engine.drivers.nats.claims import event
from engine.drivers.nats.codec import JobDoc, dumps
from engine.drivers.nats.enqueue import Duplicate, Moved, free_key, take_key
from engine.drivers.nats.store import MAX_CONFLICTS, Store
from engine.errors import (
    JobDuplicateError,
    JobNotCancellableError,
    JobNotFoundError,
    JobNotRetryableError,
)
from engine.ids import new_id
from engine.rules import (
    can_cancel,
    can_retry,
    cancel_event_data,
    cancel_transition,
    dedupe_key,
    retry_event_data,
    retry_transition,
)
from schemas.events import EventRecord
from schemas.jobs import JobRecord
from schemas.states import LIVE_STATES


def found(doc: JobDoc | None, job_id: str, tenant_id: str | None) -> JobDoc:
    """The document, or JOB_NOT_FOUND when absent or another tenant's (rule 4)."""
    if doc is None or (tenant_id is not None and doc.record.tenant_id != tenant_id):
        raise JobNotFoundError(job_id, tenant_id)
    return doc


async def cancel(store: Store, job_id: str, tenant_id: str | None, actor: str | None) -> JobRecord:
    now = store.clock.now_ms()

    def stop(doc: JobDoc | None) -> JobDoc:
        current = found(doc, job_id, tenant_id)
        if not can_cancel(current.record.state):
            raise JobNotCancellableError(job_id, current.record.state)
        record = cancel_transition(current.record, now)
        # A running holder keeps its token to hear the cancel at its next heartbeat.
        token = current.token if record.cancel_requested else None
        data = cancel_event_data(current.record.state)
        return current.with_record(record, token).with_event(
            event(current.record, "cancelled", now, data, actor)
        )

    _, after = await store.change_doc(job_id, stop)
    await free_key(store, after.record)
    return after.record


async def retry(
    store: Store, job_id: str, tenant_id: str | None, include_cancelled: bool, actor: str | None
) -> JobRecord:
    for _ in range(MAX_CONFLICTS):
        held = await store.fresh_doc(job_id)
        current = found(None if held is None else held[1], job_id, tenant_id)
        assert held is not None
        if not can_retry(current.record.state, include_cancelled):
            raise JobNotRetryableError(job_id, current.record.state)
        now = store.clock.now_ms()
        data = retry_event_data(current.record.state)
        after = current.with_record(retry_transition(current.record, now), None).with_event(
            event(current.record, "requeued", now, data, actor)
        )
        record = current.record
        if record.state in LIVE_STATES:
            # A delayed job holds its dedupe key already: only its document changes.
            if await store.write_doc(after, held[0]) is None:
                continue
            return after.record
        key = dedupe_key(record.name, record.tenant_id, record.idempotency_key)
        try:
            return await take_key(store, key, after, held[0])
        except Duplicate as dup:
            raise JobDuplicateError(
                record.name, record.idempotency_key, dup.holder.id, record.tenant_id
            ) from None
        except Moved:
            continue
    raise store.contended(keys.job(job_id))


async def record_event(store: Store, recorded: EventRecord) -> None:
    """Beside its job, in the job's document (so it goes with the job); an event of no job (or
    of one not stored here) is a key of its own."""
    if recorded.job_id is not None and await store.read_doc(recorded.job_id) is not None:

        def add(doc: JobDoc | None) -> JobDoc:
            if doc is None:
                raise _Gone
            return doc.with_event(recorded)

        try:
            await store.change_doc(recorded.job_id, add)
            return
        except _Gone:
            pass  # pruned meanwhile: kept as an event of no job
    key = keys.loose_event(recorded.at, new_id())
    await store.write(key, dumps(recorded.model_dump(mode="json")), 0)


class _Gone(Exception):
    pass
