"""Rerun from a step (engine/reruns.py) on Redis: one script (rerun_script.RERUN) reads the
row and its run's steps, plans as `engine.reruns.plan_rerun` and writes the copied steps, the
row and its event in one atomic step. The old run's id joins `P runs:<id>`, so retention
deletes its steps with the job."""

from __future__ import annotations

import json

from engine.drivers.damage import UndecodableRow
from engine.drivers.redis.claims import event_head
from engine.drivers.redis.codec import decode_record, dumps, job_state, pairs
from engine.drivers.redis.dedupe_index import mended
from engine.drivers.redis.operator import find
from engine.drivers.redis.rerun_script import RERUN_SCRIPT
from engine.drivers.redis.steps import load_steps
from engine.drivers.redis.store import Store
from engine.errors import (
    JobDuplicateError,
    JobNotFoundError,
    JobNotRetryableError,
    RerunStepUnknownError,
    RerunStepUnreachedError,
)
from schemas.jobs import JobRecord
from schemas.steps import StepRecord


async def rerun(
    store: Store,
    job_id: str,
    tenant_id: str | None,
    from_step: str,
    include_cancelled: bool,
    actor: str | None,
    new_run_id: str,
) -> JobRecord:
    now = store.clock.now_ms()
    args = [
        store.keys.prefix,
        job_id,
        "0" if tenant_id is None else "1",
        dumps(tenant_id),
        now,
        from_step,
        "1" if include_cancelled else "0",
        new_run_id,
        dumps(new_run_id),
        dumps(from_step),
        event_head(job_id, now, "requeued", actor),
    ]
    answer = await mended(store, lambda: RERUN_SCRIPT(store.client, args))
    kind = answer[0]
    if kind == "missing":
        raise JobNotFoundError(job_id, tenant_id)
    if kind == "refused":
        raise JobNotRetryableError(job_id, job_state(answer[1]), rerun=True)
    if kind == "unknown":
        raise RerunStepUnknownError(job_id, answer[1], from_step, list(answer[2:]))
    if kind == "unreached":
        _, old_run, step, status = answer
        raise RerunStepUnreachedError(job_id, old_run, from_step, step, status)
    if kind == "damaged":
        _, old_run, step, why = answer
        raise UndecodableRow(job_id, ValueError(why), "step", step, run_id=old_run)
    if kind == "dup":
        _, holder, name, tenant, key = answer
        raise JobDuplicateError(json.loads(name), json.loads(key), holder, json.loads(tenant))
    store.wake.notify()
    return decode_record(pairs(answer[1]))


async def run_steps(
    store: Store, job_id: str, run_id: str, tenant_id: str | None
) -> list[StepRecord]:
    await find(store, job_id, tenant_id)
    return [step for step in await load_steps(store, run_id, job_id) if step.job_id == job_id]
