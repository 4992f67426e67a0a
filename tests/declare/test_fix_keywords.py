"""Every fix a declaration error prints is a declaration that works: an `@job(...)` line names
only real keywords of `job()`, with values that `job()` then takes, and a `def` line parses."""

from __future__ import annotations

import ast
import hashlib
import inspect
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import BaseModel

from engine import JobContext, JobRegistry, Retry, job
from engine.declare import JobDefinition
from engine.errors import JobsError
from engine.rate_limits import RateLimit
from engine.retention import Retention


class Order(BaseModel):
    order_id: int


async def ship(input: Order, ctx: JobContext) -> None:
    return None


def ship_sync(input: Order, ctx: JobContext) -> None:
    return None


async def ship_three(input: Order, ctx: JobContext, extra: int) -> None:
    return None


KEY: dict[str, Any] = {"idempotency_key": lambda i: f"o:{i.order_id}"}
# Each way a declaration is refused: the keywords given, and the body.
REFUSED: list[tuple[dict[str, Any], Callable[..., Any]]] = [
    ({}, ship),
    ({"idempotency_key": "static"}, ship),
    ({**KEY, "name": ""}, ship),
    ({**KEY, "queue": ""}, ship),
    ({**KEY, "queue": "q" * 300}, ship),
    ({**KEY, "description": 5}, ship),
    ({**KEY, "retry": 3}, ship),
    ({**KEY, "retry": Retry(attempts=0)}, ship),
    ({**KEY, "retention": "7d"}, ship),
    ({**KEY, "retention": Retention(audit=60)}, ship),
    ({**KEY, "rate_limit": 5}, ship),
    ({**KEY, "timeout": 0}, ship),
    ({**KEY, "concurrency": 0}, ship),
    ({**KEY, "tenant_required": "yes"}, ship),
    ({**KEY, "priority": 10**9}, ship),
    ({**KEY, "priority": "high"}, ship),
    (KEY, ship_sync),
    (KEY, ship_three),
]
NAMESPACE = {"Retry": Retry, "Retention": Retention, "RateLimit": RateLimit, "hashlib": hashlib}


def _keywords_of_job() -> set[str]:
    params = inspect.signature(job).parameters.values()
    return {p.name for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY}


def _fix_of(options: dict[str, Any], body: Callable[..., Any]) -> str:
    with pytest.raises(JobsError) as raised:
        job(registry=JobRegistry(), **options)(body)
    assert not raised.value.retryable
    return raised.value.fix


@pytest.mark.parametrize(("options", "body"), REFUSED)
def test_a_fix_names_only_keywords_job_has_and_its_values_declare(
    options: dict[str, Any], body: Callable[..., Any]
) -> None:
    fix = _fix_of(options, body)
    if fix.startswith("async def "):
        ast.parse(f"{fix}\n    pass\n")
        return
    assert fix.startswith("@job("), fix
    compile(fix.removeprefix("@"), "fix", "eval")  # a keyword named twice does not compile
    call = ast.parse(fix.removeprefix("@"), mode="eval").body
    assert isinstance(call, ast.Call) and not call.args, fix
    named = {k.arg for k in call.keywords}
    assert None not in named and named <= _keywords_of_job(), fix
    mended = {k.arg: eval(ast.unparse(k.value), NAMESPACE) for k in call.keywords if k.arg}
    # The mended keywords, put over what was declared, declare the job.
    registry = JobRegistry()
    declared = job(**{**options, **mended, "registry": registry})(ship)
    assert isinstance(declared, JobDefinition) and len(registry) == 1


def test_a_look_alike_definition_is_refused_with_a_declaration_that_works() -> None:
    real = job(registry=JobRegistry(), **KEY)(ship)
    fake = JobDefinition(**{**real.__dict__, "origin": object()})
    with pytest.raises(JobsError) as raised:
        JobRegistry().add(fake)
    call = ast.parse(raised.value.fix.removeprefix("@"), mode="eval").body
    assert isinstance(call, ast.Call) and not call.args
    assert {k.arg for k in call.keywords} <= _keywords_of_job()
