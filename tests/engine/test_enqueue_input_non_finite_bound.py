"""NaN or infinity for a number the job's model bounds (`Field(le=600)`) is refused at its path
as no finite number, as pydantic says it where the field takes none (an int): it read
"Input should be less than or equal to 600", as if a smaller number were the fix."""

from __future__ import annotations

import math
from typing import Annotated, Any

import pytest
from pydantic import BaseModel, Field

from engine import Enqueue, JobContext, JobRegistry, Jobs, JobsError, job

FINITE = "Input should be a finite number"


class Inner(BaseModel):
    seconds: float = Field(le=600)


class Nap(BaseModel):
    seconds: float = Field(default=1, ge=0, le=600)
    count: int = 0
    inner: Inner | None = None
    rows: list[Inner] = []
    waits: list[Annotated[float, Field(gt=0)]] = []


def declare_nap(registry: JobRegistry) -> None:
    @job(idempotency_key=lambda i: "k", registry=registry)
    async def nap(input: Nap, ctx: JobContext) -> None:
        return None


CASES = [
    ({"seconds": math.nan}, ["seconds"]),
    ({"seconds": math.inf}, ["seconds"]),
    ({"seconds": -math.inf}, ["seconds"]),
    ({"count": math.nan}, ["count"]),  # pydantic's own entry: the wording matched
    ({"inner": {"seconds": math.nan}}, ["inner", "seconds"]),
    ({"rows": [{"seconds": 1}, {"seconds": math.inf}]}, ["rows", 1, "seconds"]),
    ({"waits": [1.5, -math.inf]}, ["waits", 1]),
]


@pytest.mark.parametrize(("given", "loc"), CASES)
async def test_a_non_finite_number_past_a_bound_is_no_finite_number_at_its_path(
    jobs: Jobs, registry: JobRegistry, given: dict[str, Any], loc: list[Any]
) -> None:
    declare_nap(registry)
    for call in (
        jobs.enqueue("nap", given),
        jobs.enqueue_many([Enqueue("nap", {}), Enqueue("nap", given)]),
    ):
        with pytest.raises(JobsError) as raised:
            await call
        exc = raised.value
        assert exc.code == "JOB_INPUT_INVALID" and not exc.retryable, exc
        assert exc.details is not None
        (entry,) = exc.details["errors"]
        assert entry == {"loc": loc, "msg": FINITE, "type": "finite_number"}, entry
        assert f"at {'.'.join(map(str, loc))}: {FINITE}" in exc.cause, exc.cause
        assert "less than" not in exc.cause and "greater than" not in exc.cause
    assert (await jobs.list()).jobs == []


async def test_a_finite_number_past_a_bound_still_names_the_bound(
    jobs: Jobs, registry: JobRegistry
) -> None:
    declare_nap(registry)
    with pytest.raises(JobsError) as raised:
        await jobs.enqueue("nap", {"inner": {"seconds": 601.0}})
    assert raised.value.details is not None
    (entry,) = raised.value.details["errors"]
    assert entry["type"] == "less_than_equal" and "600" in entry["msg"], entry
