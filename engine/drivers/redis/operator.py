"""Operator transitions (cancel, retry), each one script that checks the rule and writes the
row (settle_scripts.py), and recorded events."""

from __future__ import annotations

import json

from engine.drivers.redis.claims import event_head
from engine.drivers.redis.codec import decode_record, dumps, job_state, pairs
from engine.drivers.redis.dedupe_index import mended
from engine.drivers.redis.settle_scripts import CANCEL_SCRIPT, RETRY_SCRIPT
from engine.drivers.redis.store import Store, Write
from engine.drivers.redis.transitions import event
from engine.errors import (
    JobDuplicateError,
    JobNotCancellableError,
    JobNotFoundError,
    JobNotRetryableError,
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
    now = store.clock.now_ms()
    answer = await CANCEL_SCRIPT(
        store.client,
        [*_target(store, job_id, tenant_id), now, event_head(job_id, now, "cancelled", actor)],
    )
    if answer[0] == "missing":
        raise JobNotFoundError(job_id, tenant_id)
    if answer[0] == "refused":
        raise JobNotCancellableError(job_id, job_state(answer[1]))
    return decode_record(pairs(answer[1]))


async def retry(
    store: Store, job_id: str, tenant_id: str | None, include_cancelled: bool, actor: str | None
) -> JobRecord:
    now = store.clock.now_ms()
    args = [
        *_target(store, job_id, tenant_id),
        now,
        "1" if include_cancelled else "0",
        event_head(job_id, now, "requeued", actor),
    ]
    answer = await mended(store, lambda: RETRY_SCRIPT(store.client, args))
    if answer[0] == "missing":
        raise JobNotFoundError(job_id, tenant_id)
    if answer[0] == "refused":
        raise JobNotRetryableError(job_id, job_state(answer[1]))
    if answer[0] == "dup":
        _, holder, name, tenant, key = answer
        raise JobDuplicateError(json.loads(name), json.loads(key), holder, json.loads(tenant))
    store.wake.notify()
    return decode_record(pairs(answer[1]))


def _target(store: Store, job_id: str, tenant_id: str | None) -> list[str]:
    """The script's first arguments: the job, and the tenant it must belong to (rule 4)."""
    has_tenant = "0" if tenant_id is None else "1"
    return [store.keys.prefix, job_id, has_tenant, dumps(tenant_id)]


async def record_event(store: Store, record: EventRecord) -> None:
    w = Write()
    event(w, store.keys, record)
    await store.apply(w)
