"""The slips a developer embedding the engine makes first, and fixes that mend them in one hop:
a key given as a field's name, a step name reused in a loop, a body returning a model."""

from __future__ import annotations

import ast
import datetime
from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from engine import JobContext, JobRegistry, Jobs, JobsError, Worker, job


class Order(BaseModel):
    order_id: int
    customer: str


class Total(BaseModel):
    amount: int


def _key_of(fix: str) -> Any:
    """The key function a `@job(..., idempotency_key=...)` fix line declares."""
    call = ast.parse(fix.removeprefix("@"), mode="eval").body
    assert isinstance(call, ast.Call)
    (key,) = [k.value for k in call.keywords if k.arg == "idempotency_key"]
    return eval(compile(ast.Expression(key), "<fix>", "eval"), {"hashlib": __import__("hashlib")})


def test_a_key_given_as_a_field_name_is_mended_to_a_key_over_that_field(
    registry: JobRegistry,
) -> None:
    with pytest.raises(JobsError) as raised:

        @job(idempotency_key="order_id", registry=registry)  # type: ignore[arg-type]
        async def ship(input: Order, ctx: JobContext) -> None:
            return None

    error = raised.value
    assert error.code == "JOB_DECLARATION_INVALID"
    key = _key_of(error.fix)
    # A constant key would make every order after the first dedupe into it: jobs lost.
    assert key(Order(order_id=1, customer="a")) != key(Order(order_id=2, customer="a"))
    assert "1" in key(Order(order_id=1, customer="a"))


def test_a_key_given_as_other_text_is_mended_to_a_key_over_the_inputs_fields(
    registry: JobRegistry,
) -> None:
    with pytest.raises(JobsError) as raised:

        @job(idempotency_key="orders", registry=registry)  # type: ignore[arg-type]
        async def ship(input: Order, ctx: JobContext) -> None:
            return None

    key = _key_of(raised.value.fix)
    assert key(Order(order_id=1, customer="a")) != key(Order(order_id=2, customer="a"))


async def _failed(jobs: Jobs, name: str) -> JobsError:
    enqueued = await jobs.enqueue(name, {"order_id": 1, "customer": "a"})
    with anyio.fail_after(30):
        await Worker(jobs, prune=False).run_until_idle()
    record = await jobs.get(enqueued.id)
    assert record.state == "failed" and record.last_error is not None
    return record.last_error  # type: ignore[return-value]


def _call_of(fix: str) -> ast.Call:
    call = ast.parse(fix, mode="eval").body
    assert isinstance(call, ast.Call)
    return call


async def test_a_step_name_reused_in_a_loop_gets_a_name_for_each_pass(
    jobs: Jobs, registry: JobRegistry
) -> None:
    @job(idempotency_key=lambda i: str(i.order_id), registry=registry)
    async def pack(input: Order, ctx: JobContext) -> None:
        for n in range(3):
            await ctx.step.run("item", int, n)

    error = await _failed(jobs, "pack")
    assert error.code == "STEP_DUPLICATE"
    # "item-2" for every pass after the first would be refused again at the third.
    name = _call_of(error.fix).args[0]
    assert isinstance(name, ast.JoinedStr), error.fix
    assert "loop" in error.cause


async def test_two_steps_of_one_name_on_two_lines_get_the_second_renamed(
    jobs: Jobs, registry: JobRegistry
) -> None:
    @job(idempotency_key=lambda i: str(i.order_id), registry=registry)
    async def pack(input: Order, ctx: JobContext) -> None:
        await ctx.step.run("item", lambda: 1)
        await ctx.step.run("item", lambda: 2)

    error = await _failed(jobs, "pack")
    assert error.code == "STEP_DUPLICATE" and error.fix == 'ctx.step.run("item-2", ...)'


async def test_a_sleep_of_a_name_taken_is_mended_as_a_sleep(
    jobs: Jobs, registry: JobRegistry
) -> None:
    @job(idempotency_key=lambda i: str(i.order_id), registry=registry)
    async def pack(input: Order, ctx: JobContext) -> None:
        await ctx.step.run("cool-off", lambda: 1)
        await ctx.step.sleep("cool-off", 60)

    error = await _failed(jobs, "pack")
    assert error.code == "STEP_DUPLICATE"
    assert error.fix == 'ctx.step.sleep("cool-off-2", 60)'


async def test_a_second_wait_for_one_event_is_mended_with_a_step_name(
    jobs: Jobs, registry: JobRegistry
) -> None:
    @job(idempotency_key=lambda i: str(i.order_id), registry=registry)
    async def pack(input: Order, ctx: JobContext) -> None:
        await ctx.step.run("event:paid", lambda: 1)
        await ctx.step.wait_for_event("paid", match="1", timeout=60)

    error = await _failed(jobs, "pack")
    assert error.code == "STEP_DUPLICATE"
    call = _call_of(error.fix)
    assert ast.unparse(call.func) == "ctx.step.wait_for_event"
    keywords = {k.arg: ast.literal_eval(k.value) for k in call.keywords}
    assert keywords == {"match": "1", "timeout": 60, "step": "event:paid-2"}


async def test_a_body_returning_a_model_is_told_to_dump_it(
    jobs: Jobs, registry: JobRegistry
) -> None:
    @job(idempotency_key=lambda i: str(i.order_id), registry=registry)
    async def total(input: Order, ctx: JobContext) -> Total:
        return Total(amount=input.order_id)

    error = await _failed(jobs, "total")
    assert error.code == "JOB_OUTPUT_INVALID" and "Total" in error.cause
    assert 'model_dump(mode="json")' in error.fix and "NaN" not in error.fix


async def test_a_step_returning_a_set_is_told_to_make_it_a_list(
    jobs: Jobs, registry: JobRegistry
) -> None:
    @job(idempotency_key=lambda i: str(i.order_id), registry=registry)
    async def tags(input: Order, ctx: JobContext) -> None:
        await ctx.step.run("tags", lambda: {"a", "b"})

    error = await _failed(jobs, "tags")
    assert error.code == "JOB_OUTPUT_INVALID" and "sorted(" in error.fix


async def test_a_step_returning_a_datetime_inside_a_dict_is_told_where_and_how(
    jobs: Jobs, registry: JobRegistry
) -> None:
    @job(idempotency_key=lambda i: str(i.order_id), registry=registry)
    async def stamp(input: Order, ctx: JobContext) -> None:
        await ctx.step.run("stamp", lambda: {"n": 1, "at": datetime.datetime(2026, 1, 1)})

    error = await _failed(jobs, "stamp")
    assert error.code == "JOB_OUTPUT_INVALID"
    assert "$.at" in error.fix and "isoformat()" in error.fix


async def test_a_key_function_returning_none_is_mended_to_one_that_runs_as_given(
    jobs: Jobs, registry: JobRegistry
) -> None:
    @job(idempotency_key=lambda i: None, registry=registry)  # type: ignore[arg-type,return-value]
    async def ship(input: Order, ctx: JobContext) -> None:
        return None

    with pytest.raises(JobsError) as raised:
        await jobs.enqueue("ship", {"order_id": 1, "customer": "a"})
    error = raised.value
    assert error.code == "INVALID_ARGUMENT"
    call = ast.parse(error.fix.removeprefix("@"), mode="eval").body
    assert isinstance(call, ast.Call)
    (key,) = [k.value for k in call.keywords if k.arg == "idempotency_key"]
    # Evaluated with nothing imported: the line must run where the developer pastes it.
    function = eval(compile(ast.Expression(key), "<fix>", "eval"), {})
    assert function(Order(order_id=1, customer="a")) != function(Order(order_id=2, customer="a"))


def test_an_async_generator_body_is_told_to_return_not_yield(registry: JobRegistry) -> None:
    with pytest.raises(JobsError) as raised:

        @job(idempotency_key=lambda i: str(i.order_id), registry=registry)
        async def rows(input: Order, ctx: JobContext) -> Any:
            yield input.order_id

    error = raised.value
    assert error.code == "JOB_DECLARATION_INVALID"
    # The body IS an async def: telling the developer to make it one changes nothing.
    assert "yield" in error.cause and "yield" in error.fix
