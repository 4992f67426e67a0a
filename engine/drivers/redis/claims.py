"""The lease lifecycle: claim (one script over the queues' sorted sets), heartbeat, and the
fenced settles (ack, nack) that a stale holder cannot land (rule 13): each one script call
(settle_scripts.py), so a settle is one round trip and never reads in Python first."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any, cast

from pydantic_core import to_jsonable_python

from engine.driver_errors import StoreDamagedError
from engine.drivers.base import AckWrite
from engine.drivers.damage import UndecodableRow, burial, log_burial
from engine.drivers.redis.codec import decode_record, dumps, pairs
from engine.drivers.redis.connection import Fixes
from engine.drivers.redis.scripts import CLAIM_SCRIPT
from engine.drivers.redis.settle_scripts import ACK_SCRIPT, HEARTBEAT_SCRIPT, NACK_SCRIPT
from engine.drivers.redis.store import Store
from engine.errors import JobsError, JobSlotLostError
from engine.ids import new_token
from engine.rules import LIVE_STATES, nack_event_data, nack_transition
from schemas.events import EventRecord
from schemas.jobs import ClaimedJob, ClaimExclusion, HeartbeatResult, JobRecord, NackOptions

logger = logging.getLogger(__name__)


async def claim(
    store: Store,
    worker_id: str,
    limit: int,
    lease_ms: int,
    queues: Sequence[str] | None,
    fixes: Fixes,
    excluding: ClaimExclusion | None = None,
) -> list[ClaimedJob]:
    if limit <= 0:
        return []
    now = store.clock.now_ms()
    tokens = [new_token() for _ in range(limit)]
    wanted = "" if queues is None else dumps(list(queues))
    # After an outage the leases that ran out stay their holders' one lease longer: holders that
    # lived through it reach the server again and write the settles they held.
    grace = fixes.grace
    outage = grace.outage_seen
    take_over = "1" if grace.take_over(outage, now) else "0"
    answer = await CLAIM_SCRIPT(
        store.client,
        [
            store.keys.prefix,
            now,
            lease_ms,
            dumps(worker_id),
            limit,
            wanted,
            dumps(tokens),
            take_over,
            _excluded(excluding),
        ],
    )
    grace.claimed(outage, now, lease_ms)
    claimed: list[ClaimedJob] = []
    for has_steps, raw in answer:
        fields = pairs(raw)
        try:
            record = decode_record(fields)
        except UndecodableRow as exc:
            # The others claimed with it still run; this one is settled without being read.
            await _bury(store, exc.job_id, fields.get("token", ""), fixes.damaged(exc))
            continue
        claimed.append(
            ClaimedJob(
                record=record,
                token=fields["token"],
                lease_expires_at=record.lease_expires_at or now + lease_ms,
                has_steps=bool(int(has_steps)),
            )
        )
    return claimed


def _excluded(excluding: ClaimExclusion | None) -> str:
    """The claim script's ARGV[9]: the full caps' [queues, names, tenants], '' for none."""
    if excluding is None:
        return ""
    return dumps([sorted(excluding.queues), sorted(excluding.names), sorted(excluding.tenants)])


async def heartbeat(store: Store, job_id: str, token: str, lease_ms: int) -> HeartbeatResult:
    expires = store.clock.now_ms() + lease_ms
    answer = await HEARTBEAT_SCRIPT(store.client, [store.keys.prefix, job_id, token, expires])
    if answer[0] == "cancelled":
        return HeartbeatResult(lease_expires_at=json.loads(answer[1]) or 0, cancel_requested=True)
    if answer[0] != "ok":
        raise await store.lost.refusal(job_id, gone=answer[0] == "gone")
    return HeartbeatResult(lease_expires_at=expires, cancel_requested=False)


async def ack_many(
    store: Store, writes: Sequence[AckWrite], again: bool = False
) -> list[JobsError | None]:
    """One ACK script per job, all in one pipeline: one round trip, each settle atomic.
    `again`: an earlier try may have landed, so an ack of this token already there succeeds."""
    now = store.clock.now_ms()
    flag = "1" if again else "0"
    calls = [[store.keys.prefix, w.job_id, w.token, now, _output(w.output), flag] for w in writes]
    results = [int(r) for r in await store.pipelined(ACK_SCRIPT, calls)]
    lost = [(w.job_id, r == -1) for w, r in zip(writes, results, strict=True) if r != 1]
    refused = iter(await store.lost.refusals(lost))
    return [None if result == 1 else next(refused) for result in results]


async def _bury(store: Store, job_id: str, token: str, damage: StoreDamagedError) -> None:
    options, outcome = burial(damage, store.clock.now_ms())
    try:
        await _nack(store, job_id, token, options)
    except JobSlotLostError:
        # Its id is what cannot be read: it goes back at its lease's end, as nothing settles it.
        logger.error("redis: claimed a job that cannot be read or settled: %s", damage.cause)
        return
    log_burial("redis", outcome.state, damage)


async def nack(
    store: Store, job_id: str, token: str, options: NackOptions, again: bool = False
) -> JobRecord:
    """`again` as for `ack_many`: a nack of this token already there answers its row."""
    record = decode_record(pairs(await _nack(store, job_id, token, options, again)))
    if record.state in LIVE_STATES:
        store.wake.notify()
    return record


async def _nack(
    store: Store, job_id: str, token: str, options: NackOptions, again: bool = False
) -> list[str]:
    """The NACK script's answer: the row's fields as stored after it (JOB_SLOT_LOST when the
    token no longer holds the job)."""
    now = store.clock.now_ms()
    # What rules.nack_transition decides from the options alone; the script applies the rest
    # (the attempt given back, the queued_at kept) to the held row's values.
    outcome = nack_transition(options, now, 0, 0)
    ev = data = ""
    takes_attempt = False
    if outcome.event is not None:
        plain = nack_event_data(options, 0, outcome.run_at)
        # The held attempt is the row's: the script writes it where the rule put it.
        takes_attempt = "attempt" in plain
        plain.pop("attempt", None)
        data = dumps(plain)
        ev = event_head(job_id, now, outcome.event, None)
    error = "" if not outcome.replaces_error else dumps(_error(options))
    answer = await NACK_SCRIPT(
        store.client,
        [
            store.keys.prefix,
            job_id,
            token,
            now,
            dumps(outcome.state),
            "" if outcome.run_at is None else outcome.run_at,
            "" if outcome.finished_at is None else outcome.finished_at,
            "1" if outcome.keeps_queued_at else "0",
            "1" if options.counts_as_attempt else "0",
            error,
            ev,
            data,
            "1" if takes_attempt else "0",
            "1" if again else "0",
        ],
    )
    if isinstance(answer, int):
        raise await store.lost.refusal(job_id, gone=answer == -1)
    return cast(list[str], answer)


def _output(output: Any) -> str:
    """The output as its hash field holds it; '' when none was given (the stored one stays)."""
    return "" if output is None else dumps(to_jsonable_python(output))


def _error(options: NackOptions) -> Any:
    return None if options.error is None else options.error.model_dump(mode="json")


def event_head(job_id: str, now: int, kind: str, actor: str | None) -> str:
    """An event's JSON but its tenant and data, which the script takes from the row."""
    record = EventRecord(job_id=job_id, at=now, kind=kind, actor=actor)
    return record.model_dump_json(exclude={"tenant_id", "data"})
