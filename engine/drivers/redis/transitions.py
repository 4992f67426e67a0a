"""A record's next values as a guarded write: the hash, and every index the state decides.

Which sorted set or set holds a job follows from its state alone (keys.py), so one function
moves a job between them for every transition, written after engine.rules computed the record.
"""

from __future__ import annotations

from engine.drivers.redis.codec import dedupe_field, failing_group, flat, record_fields
from engine.drivers.redis.keys import Keys
from engine.drivers.redis.store import Write
from engine.rules import LIVE_STATES, SETTLING_STATES, WAITING_STATES, claim_rank
from schemas.events import EventRecord
from schemas.jobs import JobRecord


def transition(keys: Keys, old: JobRecord, new: JobRecord) -> Write:
    """The write that stores `new` over `old` (same id) and moves its index entries."""
    w = Write()
    k = keys.job(new.id)
    job_id = new.id
    w.op("HSET", k, *flat(record_fields(new)))
    w.op("HINCRBY", k, "ver", 1)
    w.op("ZREM", keys.queue(old.queue), job_id)
    if new.state in WAITING_STATES:
        w.op("ZADD", keys.queue(new.queue), claim_rank(new)[0], job_id)
        w.op("SADD", keys.queues, new.queue)
    if new.state == "running" and new.lease_expires_at is not None:
        w.op("ZADD", keys.leases, new.lease_expires_at, job_id)
    else:
        w.op("ZREM", keys.leases, job_id)
    dedupe = dedupe_field(new.name, new.tenant_id, new.idempotency_key)
    if new.state in LIVE_STATES:
        w.op("SADD", keys.live, job_id)
        w.op("HSET", keys.dedupe, dedupe, job_id)
        w.op("ZREM", keys.settled, job_id)
    else:
        w.op("SREM", keys.live, job_id)
        w.op("!hdel_if", keys.dedupe, dedupe, job_id)
        w.op("ZADD", keys.settled, new.finished_at or 0, job_id)
    for state in SETTLING_STATES:
        if state != new.state:
            leave_group(w, keys, failing_group(state, old.tenant_id, old.queue), job_id)
    if new.state in SETTLING_STATES:
        group = failing_group(new.state, new.tenant_id, new.queue)
        w.op("SADD", keys.failing, job_id)
        w.op("ZADD", keys.failing_group(group), 0, job_id)
        w.op("SADD", keys.failing_groups, group)
    else:
        w.op("SREM", keys.failing, job_id)
    if new.state in LIVE_STATES and new.state != "running":
        w.op("PUBLISH", keys.wake, "1")
    w.op("!changed", keys.prefix)
    return w


def leave_group(w: Write, keys: Keys, group: str, job_id: str) -> None:
    """Take `job_id` out of a dead/failed group; the group leaves `failgroups` once empty, so
    the reads that walk the groups cost the groups that hold jobs, not every one ever used."""
    w.op("!ungroup", keys.failing_group(group), job_id, keys.failing_groups, group)


def held_by(w: Write, keys: Keys, job_id: str, token: str) -> None:
    """Fence `w` on the holder: the token still holds the job, and the job is still running."""
    w.guard_eq(keys.job(job_id), "token", token)
    w.guard_eq(keys.job(job_id), "state", '"running"')


def event(w: Write, keys: Keys, record: EventRecord) -> None:
    if record.job_id is None:
        # By time, not sequence: the pruner deletes the old ones by range (jobless_events.py).
        text = record.model_dump_json()
        w.op("!event", keys.jobless_events, keys.evseq, text, record.at)
    else:
        w.op("!event", keys.events(record.job_id), keys.evseq, record.model_dump_json())
