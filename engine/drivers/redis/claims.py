"""The lease lifecycle: claim (one script over the queues' sorted sets), heartbeat, and the
fenced settles (ack, nack) that a stale holder cannot land (rule 13)."""

from __future__ import annotations

from collections.abc import Sequence

from engine.drivers.base import AckWrite
from engine.drivers.redis.codec import decode_record, dumps, pairs
from engine.drivers.redis.scripts import CLAIM_SCRIPT
from engine.drivers.redis.store import MOVED_RETRIES, Store, Write
from engine.drivers.redis.transitions import event, held_by, transition
from engine.errors import JobsError, JobSlotLostError
from engine.ids import new_token
from engine.rules import (
    LIVE_STATES,
    ack_transition,
    apply_nack,
    event_kind_for,
    nack_event_data,
)
from schemas.events import EventRecord
from schemas.jobs import ClaimedJob, HeartbeatResult, JobRecord, NackOptions


async def claim(
    store: Store, worker_id: str, limit: int, lease_ms: int, queues: Sequence[str] | None
) -> list[ClaimedJob]:
    if limit <= 0:
        return []
    now = store.clock.now_ms()
    tokens = [new_token() for _ in range(limit)]
    wanted = "" if queues is None else dumps(list(queues))
    answer = await CLAIM_SCRIPT(
        store.client,
        [store.keys.prefix, now, lease_ms, dumps(worker_id), limit, wanted, dumps(tokens)],
    )
    claimed: list[ClaimedJob] = []
    for has_steps, raw in answer:
        fields = pairs(raw)
        record = decode_record(fields)
        claimed.append(
            ClaimedJob(
                record=record,
                token=fields["token"],
                lease_expires_at=record.lease_expires_at or now + lease_ms,
                has_steps=bool(int(has_steps)),
            )
        )
    return claimed


async def read_held(store: Store, job_id: str, token: str) -> JobRecord:
    """The job `token` holds running, or JOB_SLOT_LOST."""
    fields = await store.hgetall(store.keys.job(job_id))
    if not fields or fields.get("token") != token:
        raise JobSlotLostError(job_id)
    record = decode_record(fields)
    if record.state != "running":
        raise JobSlotLostError(job_id)
    return record


async def heartbeat(store: Store, job_id: str, token: str, lease_ms: int) -> HeartbeatResult:
    keys = store.keys
    for _ in range(MOVED_RETRIES):
        fields = await store.hgetall(keys.job(job_id))
        if not fields or fields.get("token") != token:
            raise JobSlotLostError(job_id)
        record = decode_record(fields)
        if record.state == "cancelled":
            return HeartbeatResult(
                lease_expires_at=record.lease_expires_at or 0, cancel_requested=True
            )
        if record.state != "running":
            raise JobSlotLostError(job_id)
        expires = store.clock.now_ms() + lease_ms
        w = Write()
        held_by(w, keys, job_id, token)
        w.op("HSET", keys.job(job_id), "lease_expires_at", expires)
        w.op("HINCRBY", keys.job(job_id), "ver", 1)
        w.op("ZADD", keys.leases, expires, job_id)
        w.op("!extend", keys.job_slots(job_id), keys.slot_prefix, job_id, expires)
        if await store.apply(w) >= 0:
            return HeartbeatResult(lease_expires_at=expires, cancel_requested=False)
    raise JobSlotLostError(job_id)


def _settle(store: Store, old: JobRecord, new: JobRecord, token: str) -> Write:
    w = transition(store.keys, old, new)
    held_by(w, store.keys, old.id, token)
    w.op("HDEL", store.keys.job(old.id), "token")
    w.op("!release", store.keys.job_slots(old.id), store.keys.slot_prefix, old.id)
    return w


async def ack_many(store: Store, writes: Sequence[AckWrite]) -> list[JobsError | None]:
    now = store.clock.now_ms()
    rows = await store.hgetall_many([store.keys.job(w.job_id) for w in writes])
    outcomes: list[JobsError | None] = []
    planned: list[tuple[int, Write]] = []
    for n, (write, fields) in enumerate(zip(writes, rows, strict=True)):
        if not fields or fields.get("token") != write.token:
            outcomes.append(JobSlotLostError(write.job_id))
            continue
        record = decode_record(fields)
        if record.state != "running":
            outcomes.append(JobSlotLostError(write.job_id))
            continue
        outcomes.append(None)
        planned.append(
            (n, _settle(store, record, ack_transition(record, now, write.output), write.token))
        )
    results = await store.apply_many([w for _, w in planned])
    for (n, _), result in zip(planned, results, strict=True):
        if result < 0:  # the fence moved between the read and the write
            outcomes[n] = JobSlotLostError(writes[n].job_id)
    return outcomes


async def nack(store: Store, job_id: str, token: str, options: NackOptions) -> JobRecord:
    job = await read_held(store, job_id, token)
    now = store.clock.now_ms()
    record = apply_nack(job, options, now)
    w = _settle(store, job, record, token)
    kind = event_kind_for(options)
    if kind is not None:
        data = nack_event_data(options, job.attempt, record.run_at)
        event(
            w,
            store.keys,
            EventRecord(job_id=job.id, at=now, kind=kind, tenant_id=job.tenant_id, data=data),
        )
    if await store.apply(w) < 0:
        raise JobSlotLostError(job_id)
    if record.state in LIVE_STATES:
        store.wake.notify()
    return record
