"""`@job` refuses where it is written a name the engine keeps for its own jobs (taken, every
enqueue by it was JOB_INTERNAL and a later backfill JOB_NAME_TAKEN) and a key function that
cannot take the input as its one argument (taken, every enqueue was IDEMPOTENCY_KEY_FAILED)."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import BaseModel

from engine import JobContext, JobRegistry, job
from engine.backfill import BackfillRegistry
from engine.backfill.pass_job import install_pass
from engine.errors import JobDeclarationInvalidError
from engine.internal_jobs import PASS_JOB


class Order(BaseModel):
    order_id: int


def _declare(registry: JobRegistry, **options: Any) -> Any:
    @job(registry=registry, **options)
    async def ship(input: Order, ctx: JobContext) -> str:
        return "shipped"

    return ship


def test_a_name_the_engine_keeps_is_refused_with_an_allowed_name() -> None:
    registry = JobRegistry()
    with pytest.raises(JobDeclarationInvalidError) as raised:
        _declare(registry, name=PASS_JOB, idempotency_key=lambda i: str(i.order_id))
    assert raised.value.code == "JOB_DECLARATION_INVALID"
    assert raised.value.details == {"job": PASS_JOB, "field": "name", "value": repr(PASS_JOB)}
    assert raised.value.fix == '@job(name="ship")'
    assert PASS_JOB not in registry
    renamed = json.loads(raised.value.fix.removeprefix("@job(name=").removesuffix(")"))
    _declare(registry, name=renamed, idempotency_key=lambda i: str(i.order_id))
    # The engine's own pass still declares it, beside the app's job.
    assert install_pass(registry, BackfillRegistry()).name == PASS_JOB


@pytest.mark.parametrize(
    ("key", "takes"),
    [
        (lambda: "x", "it takes no positional argument"),
        (lambda i, j: "x", "it needs 2 arguments (i, j)"),
        (lambda *, i: "x", "it takes no positional argument (only i by keyword)"),
    ],
)
def test_a_key_function_of_other_than_one_argument_is_refused(
    key: Callable[..., str], takes: str
) -> None:
    registry = JobRegistry()
    with pytest.raises(JobDeclarationInvalidError) as raised:
        _declare(registry, idempotency_key=key)
    assert raised.value.details is not None and raised.value.details["field"] == "idempotency_key"
    assert takes in raised.value.cause
    assert (
        raised.value.fix == """@job(name="ship", idempotency_key=lambda i: f'ship:{i.order_id}')"""
    )
    mended = eval(raised.value.fix.split("idempotency_key=", 1)[1][:-1])
    assert _declare(registry, idempotency_key=mended).key_for(Order(order_id=7)) == "ship:7"


def _key(prefix: str, input: Order) -> str:
    return f"{prefix}{input.order_id}"


@pytest.mark.parametrize(
    "key",
    [
        lambda i, extra="": f"{i.order_id}{extra}",
        lambda *given: str(given[0].order_id),
        functools.partial(_key, "o:"),
        repr,  # a builtin: no signature to read, so taken
    ],
)
def test_a_key_function_callable_with_the_input_alone_is_taken(key: Callable[..., str]) -> None:
    definition = _declare(JobRegistry(), idempotency_key=key)
    assert definition.key_for(Order(order_id=1))
