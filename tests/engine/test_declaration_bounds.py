"""Declared values that were accepted and broke later (a cap past PostgreSQL's integer, a
duration of 1e300 s, a flag given as text) are refused where they are written, and the fix
lines of declaration errors are calls that parse."""

from __future__ import annotations

import ast
import inspect
from typing import Any

import pytest
from pydantic import BaseModel

from engine import JobContext, JobRegistry, Jobs, Limits, ManualClock, Retry, Worker, job
from engine.bounds import MAX_CAP, MAX_DELAY_SECONDS
from engine.drivers.memory import MemoryDriver
from engine.errors import JOB_KEYWORDS, InvalidArgumentError, JobsError
from engine.worker import MIN_LEASE_MS


class Order(BaseModel):
    order_id: int
    note: str = ""


def declare(registry: JobRegistry, **options: Any) -> Any:
    options.setdefault("idempotency_key", lambda i: f"o:{i.order_id}")

    @job(name="ship", registry=registry, **options)
    async def ship(input: Order, ctx: JobContext) -> None:
        return None

    return ship


def parses_as_decorator(fix: str) -> None:
    """`fix` is a decorator line that Python accepts over a function, with no prose after it."""
    ast.parse(f"{fix}\nasync def f(input, ctx):\n    pass\n")


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"concurrency": 2**31}, "concurrency"),
        ({"concurrency": MAX_CAP + 1}, "concurrency"),
        ({"timeout": 1e300}, "timeout"),
        ({"timeout": MAX_DELAY_SECONDS + 1}, "timeout"),
        ({"retry": Retry(attempts=3, base_delay=1e300, max_delay=1e300)}, "retry.base_delay"),
        ({"retry": Retry(attempts=3, base_delay=1, max_delay=1e300)}, "retry.max_delay"),
        ({"tenant_required": "false"}, "tenant_required"),
        ({"tenant_required": 1}, "tenant_required"),
        ({"tenant_required": None}, "tenant_required"),
        ({"retry": Retry(attempts=0)}, "retry.attempts"),
        ({"idempotency_key": "static"}, "idempotency_key"),
    ],
)
def test_a_declared_value_that_breaks_later_is_refused_with_a_fix_that_parses(
    registry: JobRegistry, options: dict[str, Any], field: str
) -> None:
    with pytest.raises(JobsError) as raised:
        declare(registry, **options)
    error = raised.value
    assert error.code == "JOB_DECLARATION_INVALID" and not error.retryable
    assert error.details is not None and error.details["field"] == field
    parses_as_decorator(error.fix)
    assert registry.get("ship") is None


def test_the_largest_cap_and_duration_are_taken(registry: JobRegistry) -> None:
    ship = declare(
        registry,
        concurrency=MAX_CAP,
        timeout=MAX_DELAY_SECONDS,
        retry=Retry(base_delay=MAX_DELAY_SECONDS, max_delay=MAX_DELAY_SECONDS),
    )
    assert ship.concurrency == MAX_CAP and ship.timeout_ms == MAX_DELAY_SECONDS * 1000


@pytest.mark.parametrize(
    "options",
    [
        {"global_cap": 2**31},
        {"per_tenant": 2**31},
        {"per_queue": {"mail": 2**31}},
        {"tenant_overrides": {"acme": MAX_CAP + 1}},
    ],
)
def test_a_limit_past_the_largest_cap_is_refused(options: dict[str, Any]) -> None:
    with pytest.raises(InvalidArgumentError) as raised:
        Limits(**options)
    assert not raised.value.retryable and raised.value.nearest == MAX_CAP


@pytest.mark.parametrize(
    ("options", "argument"),
    [
        ({"per_queue": {"mail": None}}, "per_queue['mail']"),
        ({"tenant_overrides": {"acme": None}}, "tenant_overrides['acme']"),
        ({"rate_per_queue": {"mail": None}}, "rate_per_queue['mail']"),
        ({"rate_tenant_overrides": {"acme": None}}, "rate_tenant_overrides['acme']"),
    ],
)
def test_a_mappings_none_is_refused_not_taken_for_no_cap(
    options: dict[str, Any], argument: str
) -> None:
    """Taken, a queue's None crashed the worker at its first job, and a tenant's exempted it
    from `per_tenant` without a word."""
    with pytest.raises(InvalidArgumentError) as raised:
        Limits(**options)
    assert raised.value.argument == argument and not raised.value.retryable


def test_the_callers_dict_changed_after_the_check_changes_no_cap() -> None:
    per_queue = {"mail": 2}
    limits = Limits(per_queue=per_queue)
    per_queue["mail"] = 0
    assert limits.caps_for("mail", None, "send", None) == [("queue:mail", 2)]
    with pytest.raises(TypeError):
        limits.per_queue["mail"] = 0  # type: ignore[index]


@pytest.mark.parametrize(
    ("options", "argument"),
    [
        ({"lease_ms": 1}, "lease_ms"),
        ({"lease_ms": 30}, "lease_ms"),
        ({"lease_ms": MIN_LEASE_MS - 1}, "lease_ms"),
        ({"concurrency": 10**30}, "concurrency"),
        ({"concurrency": MAX_CAP + 1}, "concurrency"),
        ({"prefetch": 10**30}, "prefetch"),
        ({"queues": []}, "queues"),
        ({"queues": ()}, "queues"),
    ],
)
def test_a_worker_that_could_never_work_is_refused(
    clock: ManualClock, registry: JobRegistry, options: dict[str, Any], argument: str
) -> None:
    jobs = Jobs(MemoryDriver(clock), registry=registry, clock=clock)
    with pytest.raises(InvalidArgumentError) as raised:
        Worker(jobs, **options)
    assert raised.value.argument == argument and not raised.value.retryable
    if argument == "lease_ms":
        assert raised.value.nearest == MIN_LEASE_MS and str(MIN_LEASE_MS) in raised.value.cause


def test_the_lease_floor_is_taken(clock: ManualClock, registry: JobRegistry) -> None:
    jobs = Jobs(MemoryDriver(clock), registry=registry, clock=clock)
    assert Worker(jobs, lease_ms=MIN_LEASE_MS).lease_ms == MIN_LEASE_MS


@pytest.mark.parametrize(
    ("key", "shown"),
    [
        (lambda i: 1, "1"),
        (lambda i: None, "None"),
        (lambda i: "", "''"),
        (lambda i: "k" * 2000, "'kkk"),
        (lambda i: "a\x00b", "'a\\x00b'"),
    ],
)
async def test_a_key_function_result_that_cannot_be_a_key_names_the_result_and_the_function(
    clock: ManualClock, registry: JobRegistry, key: Any, shown: str
) -> None:
    jobs = Jobs(MemoryDriver(clock), registry=registry, clock=clock)
    declare(registry, idempotency_key=key)
    with pytest.raises(JobsError) as raised:
        await jobs.enqueue("ship", {"order_id": 1})
    error = raised.value
    assert error.code == "INVALID_ARGUMENT" and not error.retryable
    assert error.details is not None and error.details["argument"] == "idempotency_key"
    assert "idempotency_key function" in error.cause and shown in error.cause
    # The fix is the job's key function, mended: a decorator line that parses.
    assert error.fix.startswith('@job(name="ship", idempotency_key=')
    parses_as_decorator(error.fix)
    assert (await jobs.list()).jobs == []


def test_the_keywords_a_declaration_fix_may_name_are_those_of_job() -> None:
    # `@job` alone (no parentheses) passes the body positionally: that one is refused.
    keywords = {
        p.name
        for p in inspect.signature(job).parameters.values()
        if p.kind is inspect.Parameter.KEYWORD_ONLY
    }
    assert keywords == JOB_KEYWORDS


@pytest.mark.parametrize(
    "policy",
    [
        Retry(attempts=0),
        Retry(attempts=2.5),  # type: ignore[arg-type]
        Retry(attempts=5000, base_delay=1e300, max_delay=1e300),
        Retry(base_delay=5, max_delay=1),
        Retry(backoff="sometimes"),  # type: ignore[arg-type]
    ],
)
def test_a_refused_retry_policy_gets_the_policy_mended_as_its_fix(
    registry: JobRegistry, policy: Retry
) -> None:
    with pytest.raises(JobsError) as raised:
        declare(registry, retry=policy)
    call = ast.parse(raised.value.fix.removeprefix("@"), mode="eval").body
    assert isinstance(call, ast.Call) and [k.arg for k in call.keywords] == ["name", "retry"]
    mended = eval(ast.unparse(call.keywords[1].value), {"Retry": Retry})
    mended.validate("ship")  # the fix as given declares
