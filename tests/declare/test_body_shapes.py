"""A job body of any shape an app writes either runs or is refused at the decorator with a typed
error (JOB_DECLARATION_INVALID / IDEMPOTENCY_REQUIRED) whose fix is the corrected declaration:
never a raw TypeError, NameError or AttributeError, and never a declaration that fails only
when a worker runs it."""

from __future__ import annotations

import ast
import functools
from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from engine import JobContext, JobRegistry, Jobs, ManualClock, Worker, job
from engine.drivers.memory import MemoryDriver
from engine.errors import JobsError


class Order(BaseModel):
    order_id: int


async def _run_one(registry: JobRegistry, clock: ManualClock, name: str) -> Any:
    """Enqueue `name` once, run it on a worker, and return its settled record."""
    jobs = Jobs(MemoryDriver(clock), registry=registry, clock=clock)
    enqueued = await jobs.enqueue(name, {"order_id": 7})
    with anyio.fail_after(10):
        await Worker(jobs, prune=False).run_until_idle()
    return await jobs.get(enqueued.id)


async def test_a_keyword_only_ctx_runs(registry: JobRegistry, clock: ManualClock) -> None:
    @job(idempotency_key=lambda i: f"o:{i.order_id}", registry=registry)
    async def ship(input: Order, *, ctx: JobContext) -> str:
        return f"{ctx.job_id != ''}:{input.order_id}"

    done = await _run_one(registry, clock, "ship")
    assert (done.state, done.output) == ("done", "True:7")


async def test_a_ctx_annotated_only_for_type_checkers_is_taken(
    registry: JobRegistry, clock: ManualClock
) -> None:
    # A module that imports JobContext under `if TYPE_CHECKING:`: only the input's annotation
    # is needed to declare the job.
    source = (
        "from __future__ import annotations\n"
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from engine import JobContext\n"
        "async def ship(input: Order, ctx: JobContext) -> int:\n"
        "    return input.order_id\n"
    )
    namespace: dict[str, Any] = {"Order": Order}
    exec(source, namespace)
    job(idempotency_key=lambda i: f"o:{i.order_id}", registry=registry)(namespace["ship"])
    assert (await _run_one(registry, clock, "ship")).output == 7


async def _charge(input: Order, ctx: JobContext, *, cents: int) -> int:
    """Charge an order."""
    return input.order_id * cents


async def test_a_partial_runs_under_its_functions_name(
    registry: JobRegistry, clock: ManualClock
) -> None:
    charge = job(idempotency_key=lambda i: f"o:{i.order_id}", registry=registry)(
        functools.partial(_charge, cents=100)
    )
    assert charge.name == "_charge" and charge.description == "Charge an order."
    assert charge.fn.__module__ == __name__  # what `--app` names to import it again
    assert (await _run_one(registry, clock, "_charge")).output == 700


class Refund:
    """Refund an order."""

    def __init__(self, cents: int) -> None:
        self.cents = cents

    async def __call__(self, input: Order, ctx: JobContext) -> int:
        return -input.order_id * self.cents


async def test_a_callable_object_runs(registry: JobRegistry, clock: ManualClock) -> None:
    refund = job(idempotency_key=lambda i: f"o:{i.order_id}", name="refund", registry=registry)(
        Refund(10)
    )
    assert refund.fn.__module__ == __name__ and refund.description == "Refund an order."
    assert (await _run_one(registry, clock, "refund")).output == -70


def _fix_declares(fix: str) -> None:
    """`fix` is a declaration Python accepts: a decorator or def line, with nothing after it."""
    if fix.startswith("@"):
        fix += "\nasync def f(input, ctx):\n    pass"
    elif fix.endswith(":"):
        fix += "\n    pass"
    compile(fix, "<fix>", "exec")  # past ast.parse: a parameter named twice is refused here


def test_an_input_annotation_that_cannot_be_resolved_is_refused(registry: JobRegistry) -> None:
    with pytest.raises(JobsError) as raised:

        @job(idempotency_key=lambda i: "k", registry=registry)
        async def ship(input: NoSuchModel, ctx: JobContext) -> None:  # type: ignore[name-defined]  # noqa: F821
            return None

    error = raised.value
    assert error.code == "JOB_DECLARATION_INVALID" and not error.retryable
    assert "NoSuchModel" in error.cause and __name__ in error.cause
    _fix_declares(error.fix)
    assert len(registry) == 0


def test_an_unresolved_model_defined_elsewhere_is_named_with_its_import(
    registry: JobRegistry,
) -> None:
    with pytest.raises(JobsError) as raised:

        @job(idempotency_key=lambda i: "k", registry=registry)
        async def ship(input: JobDescriptor, ctx: JobContext) -> None:  # type: ignore[name-defined]  # noqa: F821
            return None

    # schemas.descriptor defines the model `JobDescriptor`: the fix is the import of it.
    assert raised.value.fix == "from schemas.descriptor import JobDescriptor"
    namespace: dict[str, Any] = {}
    exec(raised.value.fix, namespace)
    assert issubclass(namespace["JobDescriptor"], BaseModel)


def test_a_bare_job_decorator_is_refused_with_the_key_to_add(registry: JobRegistry) -> None:
    with pytest.raises(JobsError) as raised:

        @job  # type: ignore[arg-type]
        async def ship(input: Order, ctx: JobContext) -> None:
            return None

    error = raised.value
    assert error.code == "IDEMPOTENCY_REQUIRED" and '"ship"' in error.cause
    _fix_declares(error.fix)
    assert error.fix.startswith("@job(") and "idempotency_key=" in error.fix


def test_a_missing_key_is_refused_with_a_key_over_the_inputs_own_fields(
    registry: JobRegistry,
) -> None:
    with pytest.raises(JobsError) as raised:

        @job(registry=registry)
        async def ship(input: Order, ctx: JobContext) -> None:
            return None

    error = raised.value
    assert error.code == "IDEMPOTENCY_REQUIRED"
    call = ast.parse(error.fix.removeprefix("@"), mode="eval").body
    assert isinstance(call, ast.Call)
    (key,) = [k.value for k in call.keywords if k.arg == "idempotency_key"]
    # The key function the fix gives runs on this job's input (no `i.id` the model lacks).
    assert eval(ast.unparse(key))(Order(order_id=3)) == "ship:3"


@pytest.mark.parametrize(
    "body",
    [
        "async def ship(input: Order) -> None: ...",
        "async def ship(input: Order, ctx: JobContext, extra: int) -> None: ...",
        "async def ship(*, input: Order, ctx: JobContext) -> None: ...",
        "async def ship(input, ctx) -> None: ...",
        "def ship(input: Order, ctx: JobContext) -> None: ...",
    ],
)
def test_a_body_that_cannot_be_called_as_a_job_is_refused_with_the_def_line_mended(
    registry: JobRegistry, body: str
) -> None:
    namespace: dict[str, Any] = {"Order": Order}
    exec(f"from __future__ import annotations\n{body}", namespace)
    with pytest.raises(JobsError) as raised:
        job(idempotency_key=lambda i: "k", registry=registry)(namespace["ship"])
    error = raised.value
    assert error.code == "JOB_DECLARATION_INVALID" and not error.retryable
    assert error.fix.startswith("async def ship(") and error.fix.endswith(":")
    _fix_declares(error.fix)
    assert len(registry) == 0


@pytest.mark.parametrize(
    "body",
    [
        "async def ship(ctx, order: Order) -> None: ...",
        "async def ship(ctx: JobContext, order: Order) -> None: ...",
        "def ship(ctx, order: Order) -> None: ...",
        "async def ship(ctx: JobContext, order: Order, extra: int) -> None: ...",
    ],
)
def test_a_body_taking_the_context_first_is_mended_to_the_input_first(
    registry: JobRegistry, body: str
) -> None:
    namespace: dict[str, Any] = {"Order": Order, "JobContext": JobContext}
    exec(f"from __future__ import annotations\n{body}", namespace)
    with pytest.raises(JobsError) as raised:
        job(idempotency_key=lambda i: "k", registry=registry)(namespace["ship"])
    assert raised.value.fix == "async def ship(order: Order, ctx: JobContext):"
    # The line as given, with a body under it, declares the job.
    exec(f"{raised.value.fix}\n    return None", namespace)
    job(idempotency_key=lambda i: "k", registry=registry)(namespace["ship"])
    assert [d.name for d in registry] == ["ship"]


def test_a_body_taking_only_the_context_names_the_input_apart_from_it(
    registry: JobRegistry,
) -> None:
    async def ship(ctx: JobContext) -> None:
        return None

    with pytest.raises(JobsError) as raised:
        job(idempotency_key=lambda i: "k", registry=registry)(ship)
    assert raised.value.fix == "async def ship(input: ShipInput, ctx: JobContext):"
