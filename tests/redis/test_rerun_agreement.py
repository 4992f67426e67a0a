"""Redis's rerun script agrees with engine/reruns.plan_rerun (the one home of the rule) over
seeded random step histories: which steps are kept and copied, the row, the event, and every
refusal (JOB_NOT_RETRYABLE, STEP_UNKNOWN, STEP_NOT_RERUNNABLE, and JOB_DUPLICATE when another
live job holds the dedupe key), with the same typed error."""

from __future__ import annotations

import random
from typing import cast

import pytest

from engine import Jobs, ManualClock
from engine.errors import JobDuplicateError, JobsError
from engine.reruns import plan_rerun
from schemas.jobs import EnqueueRequest
from schemas.states import JOB_STATES, STEP_STATUSES
from schemas.steps import StepRecord

pytest.importorskip("redis", reason="the redis extra is not installed")

from engine.drivers.redis import RedisDriver
from engine.drivers.redis.operator import find
from engine.drivers.redis.steps import load_steps
from engine.drivers.redis.store import Write
from engine.drivers.redis.transitions import transition

NAMES = ["a", "b", "c", "d", "e"]
SETTLED = ("failed", "dead", "done", "cancelled")


def _request(n: int, now: int, key: str) -> EnqueueRequest:
    return EnqueueRequest(
        id=f"{n:032x}",
        run_id=f"{1000 + n:032x}",
        name="work",
        queue="default",
        idempotency_key=key,
        input={"n": n},
        run_at=now,
        max_attempts=3,
    )


async def _history(driver: RedisDriver, rng: random.Random, n: int, now: int) -> str:
    """A job in a random state with a random run of steps (ties in started_at included, so
    the first-save order decides); sometimes another live job holding its dedupe key."""
    store = driver._store
    request = _request(n, now, f"k{n}")
    await driver.enqueue([request])
    job, _ = await find(store, request.id, None)
    state = rng.choice([*SETTLED, *SETTLED, *JOB_STATES])
    settled = state in SETTLED
    new = job.model_copy(
        update={"state": state, "finished_at": now if settled else None, "output": {"n": n}}
    )
    await store.apply(transition(store.keys, job, new))
    w = Write()
    for name in rng.sample(NAMES, rng.randint(0, len(NAMES))):
        status = rng.choice(["completed", "completed", "completed", *STEP_STATUSES])
        step = StepRecord(
            job_id=job.id,
            run_id=job.run_id,
            name=name,
            status=status,
            output={"from": name},
            started_at=now - rng.choice([1, 2, 2, 3]),
        )
        keys = store.keys
        w.op(
            "!step",
            keys.steps(job.run_id),
            keys.step_positions(job.run_id),
            name,
            step.model_dump_json(),
        )
    await store.apply(w)
    if settled and rng.random() < 0.2:
        await driver.enqueue([_request(n + 5_000, now, f"k{n}")])
    return job.id


@pytest.mark.parametrize("seed", range(4))
async def test_reruns_agree_with_plan_rerun(jobs: Jobs, clock: ManualClock, seed: int) -> None:
    driver = cast(RedisDriver, jobs.driver)
    store = driver._store
    rng = random.Random(seed)
    outcomes: set[str] = set()
    for n in range(60):
        clock.advance(1_000)
        now = clock.now_ms()
        job_id = await _history(driver, rng, seed * 1_000 + n, now)
        job, _ = await find(store, job_id, None)
        steps = await load_steps(store, job.run_id)
        from_step = rng.choice([*NAMES, "zzz"])
        include_cancelled = rng.random() < 0.5
        new_run = f"{seed:04x}{n:028x}"
        holder = await store.hget(store.keys.dedupe, f'["work","","k{seed * 1_000 + n}"]')
        try:
            plan = plan_rerun(job, steps, from_step, include_cancelled, new_run, now)
        except JobsError as refused:
            with pytest.raises(type(refused)) as raised:
                await driver.rerun(job_id, None, from_step, include_cancelled, "ops", new_run)
            got = raised.value
            assert (got.code, got.cause, got.fix, got.details) == (
                refused.code,
                refused.cause,
                refused.fix,
                refused.details,
            )
            assert await find(store, job_id, None) == (job, _)  # nothing written
            outcomes.add(refused.code)
            continue
        if holder is not None and holder != job_id:
            with pytest.raises(JobDuplicateError):
                await driver.rerun(job_id, None, from_step, include_cancelled, "ops", new_run)
            outcomes.add("JOB_DUPLICATE")
            continue
        record = await driver.rerun(job_id, None, from_step, include_cancelled, "ops", new_run)
        assert record == plan.record == await driver.get(job_id)
        assert await driver.run_steps(job_id, new_run, None) == plan.copied
        assert await driver.run_steps(job_id, job.run_id, None) == steps  # the old run stays
        events = (await jobs.trace(job_id)).events
        assert (events[-1].kind, events[-1].actor, events[-1].at) == ("requeued", "ops", now)
        assert events[-1].data == plan.event_data
        outcomes.add(f"kept {len(plan.copied)}" if plan.copied else "kept none")
    assert {"JOB_NOT_RETRYABLE", "STEP_UNKNOWN", "STEP_NOT_RERUNNABLE"} <= outcomes
    assert any(o.startswith("kept ") and o != "kept none" for o in outcomes)
    assert "JOB_DUPLICATE" in outcomes
