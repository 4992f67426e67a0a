"""A step's name and a sleep's duration are checked where the body writes them, with the bounds
every other name and delay has (engine.bounds): INVALID_ARGUMENT at the call, the same on every
driver, before anything is stored."""

from __future__ import annotations

import math
from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from engine import JobContext, JobRegistry, Jobs, JobsError, Worker, job
from engine.bounds import MAX_DELAY_SECONDS, MAX_NAME_BYTES


class Item(BaseModel):
    n: int


BAD_NAMES: dict[str, Any] = {
    "lone-surrogate": "a\ud800",
    "nul": "a\x00b",
    "too-long": "s" * (MAX_NAME_BYTES + 1),
    "too-long-in-utf8": "é" * (MAX_NAME_BYTES // 2 + 1),
    "empty": "",
    "not-text": 3,
}

BAD_SECONDS: dict[str, Any] = {
    "huge": 1e300,
    "infinite": math.inf,
    "past-ten-years": MAX_DELAY_SECONDS + 1,
    "nan": math.nan,
    "negative": -1,
    "bool": True,
}


async def _refusal(jobs: Jobs, registry: JobRegistry, call: Any) -> JobsError:
    """What `call(ctx)` raised inside a job body; the job must then settle, not hang."""
    raised: list[BaseException] = []

    @job(idempotency_key=lambda i: str(i.n), registry=registry)
    async def body(input: Item, ctx: JobContext) -> None:
        try:
            await call(ctx)
        except BaseException as exc:
            raised.append(exc)
            raise

    r = await jobs.enqueue(body, {"n": 1})
    with anyio.fail_after(30):
        await Worker(jobs).run_until_idle()
    (exc,) = raised
    assert isinstance(exc, JobsError), repr(exc)
    record = await jobs.get(r.id)
    assert record.state == "failed"
    assert record.last_error is not None and record.last_error.code == exc.code
    assert (await jobs.trace(r.id)).steps == []
    return exc


@pytest.mark.parametrize("case", list(BAD_NAMES))
@pytest.mark.parametrize("call", ["run", "sleep", "wait_for_event"])
async def test_a_bad_step_name_is_refused_at_the_call(
    jobs: Jobs, registry: JobRegistry, case: str, call: str
) -> None:
    name = BAD_NAMES[case]

    async def step(ctx: JobContext) -> None:
        if call == "run":
            await ctx.step.run(name, lambda: 1)
        elif call == "sleep":
            await ctx.step.sleep(name, 1)
        else:
            await ctx.step.wait_for_event("e", match="k", timeout=1, step=name)

    exc = await _refusal(jobs, registry, step)
    assert (exc.code, exc.retryable) == ("INVALID_ARGUMENT", False)


@pytest.mark.parametrize("case", list(BAD_SECONDS))
async def test_a_sleep_out_of_bounds_is_refused_at_the_call(
    jobs: Jobs, registry: JobRegistry, case: str
) -> None:
    seconds = BAD_SECONDS[case]

    async def sleep(ctx: JobContext) -> None:
        await ctx.step.sleep("z", seconds)

    exc = await _refusal(jobs, registry, sleep)
    assert (exc.code, exc.retryable) == ("INVALID_ARGUMENT", False)
    assert str(MAX_DELAY_SECONDS) in exc.cause


async def test_a_name_at_the_bound_and_a_ten_year_sleep_are_accepted(
    jobs: Jobs, registry: JobRegistry
) -> None:
    name = "é" * (MAX_NAME_BYTES // 2)

    @job(idempotency_key=lambda i: str(i.n), registry=registry)
    async def body(input: Item, ctx: JobContext) -> None:
        await ctx.step.run(name, lambda: 1)
        await ctx.step.sleep("long", MAX_DELAY_SECONDS)

    r = await jobs.enqueue(body, {"n": 1})
    with anyio.fail_after(30):
        await Worker(jobs).run_until_idle()
    assert (await jobs.get(r.id)).state == "suspended"
    steps = (await jobs.trace(r.id)).steps
    assert [(s.name, s.status) for s in steps] == [(name, "completed"), ("long", "sleeping")]
