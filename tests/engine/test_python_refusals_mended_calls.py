"""The Python API's refusals that the fuzz of it (test_fuzz_python_api.py) and its review found:
each refused as a typed INVALID_ARGUMENT naming the parameter the caller passed, and, where a
call that runs exists, the caller's call mended (run here as given)."""

from __future__ import annotations

import ast
from typing import Any

import pytest
from pydantic import BaseModel

from engine import JobContext, JobRegistry, Jobs, job, retry_schedule
from engine.backfill import BackfillRegistry, Backfills
from engine.errors import JobsError
from tests.backfill.support import declare_empty

pytestmark = pytest.mark.drivers("memory", "sqlite", reason="argument checks, before any store")


class In(BaseModel):
    a: int


def declare(registry: JobRegistry) -> None:
    @job(name="fz", idempotency_key=lambda i: f"fz:{i.a}", registry=registry)
    async def fz(input: In, ctx: JobContext) -> None:
        return None


async def refused(call: Any, code: str = "INVALID_ARGUMENT") -> JobsError:
    with pytest.raises(JobsError) as raised:
        await call()
    assert raised.value.code == code, raised.value.to_payload()
    assert not raised.value.retryable
    return raised.value


async def run(fix: str, jobs: Jobs, **scope: Any) -> Any:
    assert fix.startswith("await "), fix
    code = compile(fix, "<fix>", "eval", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    return await eval(code, {"jobs": jobs, **scope})


async def test_an_enqueue_refused_inside_another_call_is_not_mended_into_an_enqueue(
    jobs: Jobs, registry: JobRegistry
) -> None:
    declare(registry)
    backfills = BackfillRegistry()

    async def count() -> int:
        await jobs.enqueue("fz", {"a": 1}, priority=11)
        return 0

    declare_empty(backfills, count=count)
    # A dry run's fix that enqueues a job would write what the caller only rehearsed.
    error = await refused(lambda: Backfills(jobs, registry=backfills).dry_run("fill"))
    assert "jobs.enqueue" not in error.fix, error.fix
    # Called by the caller, the same refusal is its call mended, as every method's is.
    error = await refused(lambda: jobs.enqueue("fz", {"a": 1}, priority=11))
    assert error.fix == 'await jobs.enqueue("fz", {"a": 1}, priority=10)'


@pytest.mark.parametrize("cursor", ["not-a-cursor", 5, b"x"])
async def test_a_bad_runs_page_cursor_names_the_cursor_parameter(jobs: Jobs, cursor: Any) -> None:
    backfills = BackfillRegistry()
    declare_empty(backfills)
    svc = Backfills(jobs, registry=backfills)
    code = "CURSOR_INVALID" if isinstance(cursor, str) else "INVALID_ARGUMENT"
    error = await refused(lambda: svc.runs_page("fill", cursor=cursor), code)
    assert (error.details or {}).get("argument") == "cursor", error.to_payload()
    assert "runs_cursor=" not in error.cause


async def test_a_settled_counts_window_out_of_bounds_is_the_call_mended(jobs: Jobs) -> None:
    cases = [
        (lambda: jobs.settled_counts(-5, 10), "await jobs.settled_counts(0, 10)"),
        (lambda: jobs.settled_counts(10, 5), "await jobs.settled_counts(10, 10)"),
        (
            lambda: jobs.settled_counts(0, 2**63, tenant_id="acme"),
            f'await jobs.settled_counts(0, {2**63 - 1}, tenant_id="acme")',
        ),
    ]
    for call, fix in cases:
        error = await refused(call)
        assert error.fix == fix
        await run(error.fix, jobs)


async def test_stats_of_too_many_queue_names_repeated_is_the_call_with_each_once(
    jobs: Jobs,
) -> None:
    error = await refused(lambda: jobs.stats(["a", "b"] * 600))
    assert error.fix == 'await jobs.stats(["a", "b"])'
    assert isinstance(await run(error.fix, jobs), list)


async def test_objects_of_the_wrong_kind_are_invalid_arguments(
    jobs: Jobs, registry: JobRegistry
) -> None:
    declare(registry)
    backfills = BackfillRegistry()
    declare_empty(backfills)
    svc = Backfills(jobs, registry=backfills)

    async def declared_in(bogus: Any) -> None:
        @job(name="other", idempotency_key=lambda i: "k", registry=bogus)
        async def other(input: In, ctx: JobContext) -> None:
            return None

    async def built(**kwargs: Any) -> None:
        Backfills(jobs, **kwargs)

    async def scheduled(policy: Any) -> None:
        retry_schedule(policy)

    calls: list[tuple[Any, str, str]] = [
        (lambda: jobs.runs("not a record"), "INVALID_ARGUMENT", "job"),  # type: ignore[arg-type]
        (lambda: declared_in({}), "JOB_DECLARATION_INVALID", "registry"),
        (lambda: built(registry=set()), "INVALID_ARGUMENT", "registry"),
        (lambda: built(environment=0), "INVALID_ARGUMENT", "environment"),
        (lambda: built(environment=["prod"]), "INVALID_ARGUMENT", "environment"),
        (lambda: svc.newest_run(["fill"]), "INVALID_ARGUMENT", "name"),  # type: ignore[arg-type]
        (lambda: svc.newest_run("fill", "finished"), "INVALID_ARGUMENT", "status"),  # type: ignore[arg-type]
    ]
    for call, code, argument in calls:
        error = await refused(call, code)
        details = error.details or {}
        assert details.get("argument", details.get("field")) == argument, error.to_payload()


async def test_a_retry_schedule_of_no_retry_policy_is_an_invalid_argument() -> None:
    async def scheduled() -> None:
        retry_schedule({"attempts": 3})  # type: ignore[arg-type]

    error = await refused(scheduled)
    assert (error.details or {}).get("argument") == "policy"
