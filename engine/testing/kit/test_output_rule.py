"""One job's output never hurts another job (issue #19): the engine checks what a body or a step
returns against the one storage rule (engine.storable) before the value joins a write shared
with other jobs. A value outside it fails that job alone, for good (JOB_OUTPUT_INVALID, with the
path of the bad value); every other job drained by the same worker completes exactly once."""

from __future__ import annotations

from collections import Counter
from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from engine import JobContext, JobRegistry, Jobs, ManualClock, Permanent, Retry, Worker, job
from engine.storable import find_unstorable

# Enough jobs for one worker to run them at once, so their settles share batched writes.
COUNT = 16
BAD = 7
# Past any lease and any retry delay: a job left running or retried would be claimed again.
LATER_MS = 3_600_000

BAD_VALUES: dict[str, tuple[Any, str]] = {
    "nan": (float("nan"), "$"),
    "infinity": (float("-inf"), "$"),
    "nul": ("a\x00b", "$"),
    "lone-surrogate": ("\ud800", "$"),
    "nul-in-a-dict": ({"rows": [{"name": "ok"}, {"name": "x\x00"}]}, "$.rows[1].name"),
    "nan-in-a-list": ([1, [2.5, float("nan")]], "$[1][1]"),
    "surrogate-in-a-dict": ({"a": {"b": ["\udfff"]}}, "$.a.b[0]"),
}


class Item(BaseModel):
    n: int


async def _drain(jobs: Jobs, clock: ManualClock) -> None:
    """Run everything due with one worker, then again once every lease and delay has passed."""
    worker = Worker(jobs, concurrency=COUNT)
    with anyio.fail_after(30):
        assert await worker.run_until_idle() == COUNT
        clock.advance(LATER_MS)
        assert await worker.run_until_idle() == 0


@pytest.mark.parametrize("case", list(BAD_VALUES))
async def test_a_job_returning_a_value_outside_the_rule_fails_alone(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock, case: str
) -> None:
    bad_value, path = BAD_VALUES[case]
    runs: Counter[int] = Counter()

    @job(idempotency_key=lambda i: str(i.n), retry=Retry(attempts=3), registry=registry)
    async def produce(input: Item, ctx: JobContext) -> Any:
        runs[input.n] += 1
        return bad_value if input.n == BAD else {"n": input.n, "text": f"été {input.n}"}

    ids = [(await jobs.enqueue(produce, {"n": n})).id for n in range(COUNT)]
    await _drain(jobs, clock)

    bad = await jobs.get(ids[BAD])
    assert (bad.state, bad.attempt, bad.output) == ("failed", 1, None)
    assert bad.last_error is not None and bad.last_error.code == "JOB_OUTPUT_INVALID"
    assert f" at {path}" in bad.last_error.cause
    for n, job_id in enumerate(ids):
        if n != BAD:
            record = await jobs.get(job_id)
            assert (record.state, record.output) == ("done", {"n": n, "text": f"été {n}"})
    assert runs == Counter(range(COUNT))


@pytest.mark.parametrize("case", ["nan", "nul", "lone-surrogate", "nul-in-a-dict"])
async def test_a_step_returning_a_value_outside_the_rule_is_not_stored(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock, case: str
) -> None:
    bad_value, path = BAD_VALUES[case]
    calls: Counter[int] = Counter()
    fixed = {"yet": False}

    def fetch(n: int) -> Any:
        calls[n] += 1
        return bad_value if n == BAD and not fixed["yet"] else [n, "fetched"]

    @job(idempotency_key=lambda i: str(i.n), retry=Retry(attempts=3), registry=registry)
    async def uses_a_step(input: Item, ctx: JobContext) -> Any:
        return await ctx.step.run("fetch", fetch, input.n)

    ids = [(await jobs.enqueue(uses_a_step, {"n": n})).id for n in range(COUNT)]
    await _drain(jobs, clock)

    bad = await jobs.get(ids[BAD])
    assert (bad.state, bad.attempt) == ("failed", 1)
    assert bad.last_error is not None and bad.last_error.code == "JOB_OUTPUT_INVALID"
    assert f" at {path}" in bad.last_error.cause
    (step,) = (await jobs.trace(ids[BAD])).steps
    assert (step.status, step.output) == ("failed", None)
    assert step.error is not None and step.error.startswith("JOB_OUTPUT_INVALID")
    for n, job_id in enumerate(ids):
        if n != BAD:
            assert (await jobs.get(job_id)).output == [n, "fetched"]
    assert calls == Counter(range(COUNT))

    # Nothing was stored for the refused step, so a retry runs it again (and only it).
    fixed["yet"] = True
    await jobs.retry(ids[BAD], actor="test")
    with anyio.fail_after(30):
        assert await Worker(jobs).run_until_idle() == 1
    record = await jobs.get(ids[BAD])
    assert (record.state, record.output) == ("done", [BAD, "fetched"])
    (step,) = (await jobs.trace(ids[BAD])).steps
    assert (step.status, step.output, step.attempts) == ("completed", [BAD, "fetched"], 2)
    assert calls == Counter(range(COUNT)) + Counter([BAD])


async def test_an_error_message_outside_the_rule_is_stored_without_it(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    """An exception's text is the job's too: a NUL or a lone surrogate in it must not make the
    database refuse the failed step's write or the job's settle (and its batch-mates' with it)."""
    runs: Counter[int] = Counter()

    def flaky(n: int) -> str:
        if n == BAD:
            raise ValueError("bad \x00 byte and \ud800 half")
        return f"ok {n}"

    @job(idempotency_key=lambda i: str(i.n), retry=Retry(attempts=1), registry=registry)
    async def step_raises(input: Item, ctx: JobContext) -> str:
        runs[input.n] += 1
        return str(await ctx.step.run("flaky", flaky, input.n))

    @job(idempotency_key=lambda i: str(i.n), registry=registry)
    async def body_raises(input: Item, ctx: JobContext) -> None:
        runs[-1] += 1
        raise Permanent("declined: \ud800\x00")

    ids = [(await jobs.enqueue(step_raises, {"n": n})).id for n in range(COUNT - 1)]
    other = (await jobs.enqueue(body_raises, {"n": 0})).id
    await _drain(jobs, clock)

    dead = await jobs.get(ids[BAD])
    assert dead.state == "dead" and dead.last_error is not None
    assert dead.last_error.cause.startswith("ValueError")
    assert find_unstorable(dead.last_error.model_dump(mode="json")) is None
    (step,) = (await jobs.trace(ids[BAD])).steps
    assert step.status == "failed" and step.error is not None
    assert find_unstorable(step.error) is None
    failed = await jobs.get(other)
    assert failed.state == "failed" and failed.last_error is not None
    assert find_unstorable(failed.last_error.model_dump(mode="json")) is None
    for n, job_id in enumerate(ids):
        if n != BAD:
            assert (await jobs.get(job_id)).output == f"ok {n}"
    assert runs == Counter([*range(COUNT - 1), -1])
