"""Names users give the system (job and queue names, event names, tenant ids, idempotency keys)
with a control character (C0, C1, DEL), a line or paragraph separator or a bidirectional
override are refused where they are first written, as INVALID_ARGUMENT (terminal) whose fix
runs with those characters dropped; a job or queue name starting with '-' (a CLI option in
every fix line that names it) and a declared queue '*' (every queue, to a worker) are refused
at the declaration. Sane names (unicode letters, spaces inside, dots, colons, slashes) pass,
and a row already stored under a bad name is still listed, inspected and cancelled."""

from __future__ import annotations

import ast
from typing import Any

import pytest
from pydantic import BaseModel

from engine import JobContext, JobRegistry, Jobs, bounds, job
from engine.errors import InvalidArgumentError, JobDeclarationInvalidError, JobsError

BAD = [
    "a\nb",
    "a\x1b[31mb",
    "a\x07b",
    "a\tb",
    "a\x7fb",
    "a\x85b",
    "a\u2028b",
    "a\u2029b",
    "a\u202eb",
]
SANE = ["ünïcødé 名前", "two words", "mail.v2", "billing:eu/west", "x-y_z", "-1"[1:]]


class Order(BaseModel):
    order_id: int


def _declare(registry: JobRegistry, **options: Any) -> Any:
    options.setdefault("idempotency_key", lambda i: f"o:{i.order_id}")

    @job(registry=registry, **options)
    async def ship(input: Order, ctx: JobContext) -> None:
        return None

    return ship


def _decorator_runs(fix: str) -> dict[str, Any]:
    """Apply the fix line (a `@job(...)` decorator) to a fresh job; the declared options."""
    call = ast.parse(fix.removeprefix("@"), mode="eval").body
    assert isinstance(call, ast.Call) and not call.args, fix
    return {k.arg: ast.literal_eval(k.value) for k in call.keywords if k.arg is not None}


@pytest.mark.parametrize("bad", BAD)
@pytest.mark.parametrize("field", ["name", "queue"])
def test_a_declared_name_or_queue_with_a_control_character_is_refused_with_a_fix_that_runs(
    registry: JobRegistry, bad: str, field: str
) -> None:
    with pytest.raises(JobDeclarationInvalidError) as raised:
        _declare(registry, **{field: bad})
    assert not raised.value.retryable
    options = _decorator_runs(raised.value.fix)
    assert options[field] == "ab"
    options.pop("idempotency_key", None)
    _declare(registry, **options)  # the fix, applied, declares the job


@pytest.mark.parametrize(
    ("field", "bad", "mended"),
    [
        ("name", "-ship", "ship"),
        ("queue", "--x", "x"),
        ("queue", "*", "default"),
        ("queue", "-", "default"),
    ],
)
def test_a_declared_name_or_queue_that_a_command_line_misreads_is_refused(
    registry: JobRegistry, field: str, bad: str, mended: str
) -> None:
    with pytest.raises(JobDeclarationInvalidError) as raised:
        _declare(registry, **{field: bad})
    options = _decorator_runs(raised.value.fix)
    assert options[field] == mended
    options.pop("idempotency_key", None)
    _declare(registry, **options)


@pytest.mark.parametrize("sane", SANE)
def test_sane_names_are_still_declared(registry: JobRegistry, sane: str) -> None:
    assert _declare(registry, name=sane, queue=sane).queue == sane


@pytest.mark.parametrize("bad", BAD)
async def test_an_enqueue_tenant_with_a_control_character_is_refused(
    jobs: Jobs, registry: JobRegistry, bad: str
) -> None:
    _declare(registry, name="ship")
    with pytest.raises(InvalidArgumentError) as raised:
        await jobs.enqueue("ship", {"order_id": 1}, tenant_id=bad)
    assert raised.value.argument == "tenant_id" and raised.value.nearest == "ab"
    assert not raised.value.retryable
    again = await jobs.enqueue("ship", {"order_id": 1}, tenant_id=raised.value.nearest)
    assert (await jobs.get(again.id)).tenant_id == "ab"


async def test_enqueue_many_refuses_a_bad_tenant_and_stores_nothing(
    jobs: Jobs, registry: JobRegistry
) -> None:
    from engine import Enqueue

    _declare(registry, name="ship")
    with pytest.raises(InvalidArgumentError):
        await jobs.enqueue_many(
            [Enqueue("ship", {"order_id": 1}), Enqueue("ship", {"order_id": 2}, "t\x1b[0m")]
        )
    assert (await jobs.list()).jobs == []


@pytest.mark.parametrize("bad", BAD)
async def test_a_computed_key_with_a_control_character_is_refused(
    jobs: Jobs, registry: JobRegistry, bad: str
) -> None:
    _declare(registry, name="ship", idempotency_key=lambda i: f"o:{bad}")
    with pytest.raises(InvalidArgumentError) as raised:
        await jobs.enqueue("ship", {"order_id": 1})
    assert raised.value.argument == "idempotency_key"
    assert raised.value.fix.startswith('@job(name="ship", idempotency_key=lambda i:')


@pytest.mark.parametrize("bad", BAD)
@pytest.mark.parametrize("argument", ["name", "key", "tenant_id"])
async def test_an_event_sent_with_a_control_character_is_refused(
    jobs: Jobs, bad: str, argument: str
) -> None:
    given: dict[str, Any] = {"name": "paid", "key": "k", "tenant_id": None, argument: bad}
    with pytest.raises(InvalidArgumentError) as raised:
        await jobs.send_event(given["name"], given["key"], tenant_id=given["tenant_id"])
    assert raised.value.argument == argument and raised.value.nearest == "ab"
    mended = {**given, argument: raised.value.nearest}
    await jobs.send_event(mended["name"], mended["key"], tenant_id=mended["tenant_id"])


async def test_an_event_name_starting_with_a_dash_is_refused(jobs: Jobs) -> None:
    with pytest.raises(InvalidArgumentError) as raised:
        await jobs.send_event("--paid", "k")
    assert raised.value.nearest == "paid"


@pytest.mark.parametrize("sane", SANE)
async def test_sane_tenants_keys_and_event_names_are_taken(
    jobs: Jobs, registry: JobRegistry, sane: str
) -> None:
    _declare(registry, name="ship", idempotency_key=lambda i: f"{sane}:{i.order_id}")
    made = await jobs.enqueue("ship", {"order_id": 1}, tenant_id=f"-{sane}")
    assert (await jobs.get(made.id)).tenant_id == f"-{sane}"
    await jobs.send_event(sane, f"-{sane}", tenant_id=sane)


@pytest.mark.parametrize(
    ("limits", "argument"),
    [
        ({"per_queue": {"a\nb": 1}}, "per_queue key"),
        ({"per_queue": {"*": 1}}, "per_queue key"),
        ({"tenant_overrides": {"t\x1b[31m": 1}}, "tenant_overrides key"),
    ],
)
def test_limits_keyed_by_a_name_no_queue_or_tenant_can_have_are_refused(
    limits: dict[str, Any], argument: str
) -> None:
    from engine import Limits

    with pytest.raises(InvalidArgumentError) as raised:
        Limits(**limits)
    assert raised.value.argument == argument


def test_the_rule_has_one_home() -> None:
    for bad in BAD:
        with pytest.raises(InvalidArgumentError):
            bounds.tenant("tenant_id", bad)
    assert bounds.tenant("tenant_id", "-acme") == "-acme"
    with pytest.raises(JobsError):
        bounds.queue_name("queue", "*")


async def test_a_row_stored_under_bad_names_is_still_listed_inspected_and_cancelled(
    jobs: Jobs, registry: JobRegistry, clock: Any
) -> None:
    """Stored before the rule (written here past the client's checks): reads never refuse it."""
    from engine.ids import new_ids
    from schemas.jobs import EnqueueRequest

    _declare(registry, name="ship")
    job_id, run_id = new_ids(2, clock.now_ms())
    name, queue, tenant, key = "-ship\n", "*", "t\x1b[31m", "k\u2028"
    request = EnqueueRequest(
        job_id, run_id, name, queue, key, {"order_id": 1}, clock.now_ms() + 60_000, 3, tenant
    )
    await jobs.driver.enqueue([request], now=clock.now_ms())
    listed = await jobs.list(name=name, queue=queue, tenant_id=tenant)
    assert [j.id for j in listed.jobs] == [job_id]
    assert (await jobs.get(job_id, tenant_id=tenant)).idempotency_key == key
    await jobs.cancel(job_id, tenant_id=tenant)
    assert (await jobs.get(job_id)).state == "cancelled"
