"""NaN or infinity anywhere in a job's input is one fault with one code: JOB_INPUT_INVALID at its
path, "Input should be a finite number", non-retryable. In a float field with no bound it was
INVALID_ARGUMENT ("nan is not a JSON number", the storable rule's) while a bounded field said
JOB_INPUT_INVALID; a job known only by its published descriptor says the same. What is not a
job's input (a step's output, an event's data) keeps the storable rule's INVALID_ARGUMENT."""

from __future__ import annotations

import math
from typing import Any

import pytest
from pydantic import BaseModel, Field

from engine import Enqueue, JobContext, JobRegistry, Jobs, JobsError, ManualClock, Worker, job
from engine.storable import find_unstorable

FINITE = {"msg": "Input should be a finite number", "type": "finite_number"}


class Row(BaseModel):
    at: float


class Sample(BaseModel):
    free: float = 0
    capped: float = Field(default=0, le=600)
    rows: list[Row] = []


def _declare(registry: JobRegistry) -> None:
    @job(idempotency_key=lambda i: "k", registry=registry)
    async def sample(input: Sample, ctx: JobContext) -> None:
        return None


CASES = [
    ({"free": math.nan}, ["free"]),
    ({"free": math.inf}, ["free"]),
    ({"free": -math.inf}, ["free"]),
    ({"capped": math.nan}, ["capped"]),
    ({"rows": [{"at": 1.0}, {"at": math.inf}]}, ["rows", 1, "at"]),
]


async def _refusal(call: Any) -> JobsError:
    with pytest.raises(JobsError) as raised:
        await call
    return raised.value


@pytest.mark.parametrize(("given", "loc"), CASES)
async def test_bounded_or_not_a_non_finite_number_is_job_input_invalid_at_its_field(
    jobs: Jobs, registry: JobRegistry, given: dict[str, Any], loc: list[Any]
) -> None:
    _declare(registry)
    for call in (
        lambda: jobs.enqueue("sample", given),
        lambda: jobs.enqueue_many([Enqueue("sample", {}), Enqueue("sample", given)]),
    ):
        exc = await _refusal(call())
        assert exc.code == "JOB_INPUT_INVALID" and not exc.retryable, exc
        assert exc.details is not None and exc.details["errors"] == [{"loc": loc, **FINITE}]
        assert f"at {'.'.join(map(str, loc))}: {FINITE['msg']}" in exc.cause, exc.cause
    assert (await jobs.list()).jobs == []


@pytest.mark.drivers("memory", reason="the rule is the client's, before any driver")
async def test_a_job_known_by_its_published_descriptor_says_the_same(
    jobs: Jobs, clock: ManualClock
) -> None:
    """No model here, only the published JSON Schema (which lets NaN through a bound)."""
    app = JobRegistry()
    _declare(app)
    await Worker(Jobs(jobs.driver, registry=app, clock=clock)).publish_descriptors()
    for given, loc in CASES:
        exc = await _refusal(jobs.enqueue("sample", given, key="k"))
        assert exc.code == "JOB_INPUT_INVALID" and not exc.retryable, exc
        assert exc.details is not None and exc.details["errors"] == [{"loc": loc, **FINITE}]
    assert (await jobs.list()).jobs == []


def test_the_storable_rule_says_where_and_that_a_number_is_not_finite() -> None:
    bad = find_unstorable({"n": 1, "deep": {"rows": [0.5, math.nan]}})
    assert bad is not None and bad.not_finite
    assert (bad.path, bad.loc) == ("$.deep.rows[1]", ("deep", "rows", 1))
    text = find_unstorable({"deep": ["a\x00"]})
    assert text is not None and not text.not_finite and text.loc == ("deep", 0)
