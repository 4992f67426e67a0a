"""Reruns from a step (engine.reruns): the copied steps, the new run's record and its event are
one document, so a rerun is one compare-and-set, taken through the dedupe index as a retry is."""

from __future__ import annotations

from dataclasses import replace

from engine.drivers.nats import keys
from engine.drivers.nats.claims import event
from engine.drivers.nats.enqueue import Duplicate, Moved, take_key
from engine.drivers.nats.operator import found
from engine.drivers.nats.store import MAX_CONFLICTS, Store
from engine.errors import JobDuplicateError
from engine.reruns import plan_rerun
from engine.rules import dedupe_key
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
    for _ in range(MAX_CONFLICTS):
        held = await store.fresh_doc(job_id)
        current = found(None if held is None else held[1], job_id, tenant_id)
        assert held is not None
        job = current.record
        now = store.clock.now_ms()
        steps = sorted(current.run_steps(job.run_id), key=lambda s: s.started_at)
        plan = plan_rerun(job, steps, from_step, include_cancelled, new_run_id, now)
        runs = dict(current.steps)
        runs[new_run_id] = {step.name: step for step in plan.copied}
        after = replace(current, steps=runs).with_record(plan.record, None)
        after = after.with_event(event(job, "requeued", now, plan.event_data, actor))
        key = dedupe_key(job.name, job.tenant_id, job.idempotency_key)
        try:
            return await take_key(store, key, after, held[0])
        except Duplicate as dup:
            raise JobDuplicateError(
                job.name, job.idempotency_key, dup.holder.id, job.tenant_id
            ) from None
        except Moved:
            continue
    raise store.contended(keys.job(job_id))


async def run_steps(
    store: Store, job_id: str, run_id: str, tenant_id: str | None
) -> list[StepRecord]:
    held = await store.fresh_doc(job_id)
    doc = found(None if held is None else held[1], job_id, tenant_id)
    steps = sorted(doc.run_steps(run_id), key=lambda s: s.started_at)
    return [step for step in steps if step.job_id == job_id]
