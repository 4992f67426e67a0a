"""An enqueue of a declaration whose name this client's registry holds for another declaration
is refused (JOB_NAME_TAKEN): it was stored, and the worker here ran the registered one, whose
model failed it (`JOB_INPUT_INVALID` at run time) or whose function was not the one asked for.
A declaration the registry does not hold is enqueued as before (a worker elsewhere runs it)."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from engine import JobContext, JobRegistry, connect, job
from engine.errors import JobNameTakenError

here, there = JobRegistry(), JobRegistry()


class Count(BaseModel):
    n: int


class Word(BaseModel):
    m: str


@job(registry=here, name="same", idempotency_key=lambda i: str(i.n))
async def same_here(input: Count, ctx: JobContext) -> str:
    return "here"


@job(registry=there, name="same", idempotency_key=lambda i: i.m)
async def same_there(input: Word, ctx: JobContext) -> str:
    return "there"


@job(registry=there, idempotency_key=lambda i: str(i.n))
async def only_there(input: Count, ctx: JobContext) -> None:
    return None


async def test_a_declaration_the_registry_holds_another_of_is_refused_and_nothing_stored() -> None:
    jobs = await connect("memory://", registry=here)
    try:
        with pytest.raises(JobNameTakenError) as refused:
            await jobs.enqueue(same_there, {"m": "x"})
        assert "same_here" in refused.value.cause and "same_there" in refused.value.cause
        assert (await jobs.list()).jobs == []
        mine = await jobs.enqueue(same_here, {"n": 1})
        elsewhere = await jobs.enqueue(only_there, {"n": 2})
        assert {r.id for r in (await jobs.list()).jobs} == {mine.id, elsewhere.id}
    finally:
        await jobs.close()
