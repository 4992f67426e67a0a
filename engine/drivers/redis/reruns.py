"""Rerun from a step (engine/reruns.py) on Redis: read the row and its run's steps, plan with
`engine.reruns.plan_rerun`, then one guarded write (the row's write counter, the dedupe key
free or its own, as `operator.retry`) stores the copied steps under the new run, the row and
its event. The old run's id joins `P runs:<id>`, so retention deletes its steps with the job."""

from __future__ import annotations

from engine.drivers.redis.codec import dedupe_field
from engine.drivers.redis.operator import find
from engine.drivers.redis.steps import load_steps
from engine.drivers.redis.store import MOVED_RETRIES, Store
from engine.drivers.redis.transitions import event, transition
from engine.errors import JobDuplicateError, JobNotRetryableError
from engine.reruns import plan_rerun
from schemas.events import EventRecord
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
    keys = store.keys
    for _ in range(MOVED_RETRIES):
        job, ver = await find(store, job_id, tenant_id)
        steps = await load_steps(store, job.run_id)
        now = store.clock.now_ms()
        plan = plan_rerun(job, steps, from_step, include_cancelled, new_run_id, now)
        dedupe = dedupe_field(job.name, job.tenant_id, job.idempotency_key)
        holder = await store.hget(keys.dedupe, dedupe)
        if holder is not None and holder != job_id:
            raise JobDuplicateError(job.name, job.idempotency_key, holder, job.tenant_id)
        w = transition(keys, job, plan.record)
        w.guard_eq(keys.job(job_id), "ver", ver)
        w.guard_absent_or(keys.dedupe, dedupe, job_id)
        w.op("HDEL", keys.job(job_id), "token")
        for step in plan.copied:  # in run order, so first-save positions keep it
            w.op(
                "!step",
                keys.steps(new_run_id),
                keys.step_positions(new_run_id),
                step.name,
                step.model_dump_json(),
            )
        w.op("SADD", keys.job_runs(job_id), job.run_id)
        record = EventRecord(
            job_id=job_id,
            at=now,
            kind="requeued",
            actor=actor,
            tenant_id=job.tenant_id,
            data=plan.event_data,
        )
        event(w, keys, record)
        if await store.apply(w) >= 0:
            store.wake.notify()
            return plan.record
    raise JobNotRetryableError(job_id, job.state, rerun=True)


async def run_steps(
    store: Store, job_id: str, run_id: str, tenant_id: str | None
) -> list[StepRecord]:
    await find(store, job_id, tenant_id)
    return [step for step in await load_steps(store, run_id) if step.job_id == job_id]
