"""Enqueue input the model accepts but JSON cannot carry as it is: refused with a typed error
naming where, never a raw exception, and never stored changed (NaN silently become null)."""

from __future__ import annotations

import math
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict

from engine import Enqueue, JobContext, JobRegistry, Jobs, JobsError, job


class Blob(BaseModel):
    data: bytes


class Open(BaseModel):
    model_config = ConfigDict(extra="allow")
    k: str
    rows: list[Any] = []


def _declare(registry: JobRegistry) -> None:
    @job(idempotency_key=lambda i: "k", registry=registry)
    async def blob(input: Blob, ctx: JobContext) -> None:
        return None

    @job(idempotency_key=lambda i: i.k, registry=registry)
    async def open_job(input: Open, ctx: JobContext) -> None:
        return None


async def _refused(jobs: Jobs, name: str, value: Any) -> JobsError:
    with pytest.raises(JobsError) as raised:
        await jobs.enqueue(name, value)
    assert not raised.value.retryable
    assert (await jobs.list()).jobs == []
    return raised.value


async def test_bytes_that_are_not_utf8_are_job_input_invalid_at_their_field(
    jobs: Jobs, registry: JobRegistry
) -> None:
    _declare(registry)
    for given in (Blob(data=b"\xff\x00"), {"data": b"\xff\x00"}):
        exc = await _refused(jobs, "blob", given)
        assert exc.code == "JOB_INPUT_INVALID"
        assert exc.details is not None and exc.details["errors"][0]["loc"] == ["data"]


@pytest.mark.parametrize(
    ("extra", "loc"),
    [
        ({"v": object()}, ["v"]),
        ({"v": {"deep": [1, object()]}}, ["v", "deep", 1]),
        ({"rows": [1, b"\xfe"]}, ["rows", 1]),
    ],
)
async def test_a_value_json_cannot_hold_is_job_input_invalid_at_its_path(
    jobs: Jobs, registry: JobRegistry, extra: dict[str, Any], loc: list[Any]
) -> None:
    _declare(registry)
    exc = await _refused(jobs, "open_job", {"k": "a", **extra})
    assert exc.code == "JOB_INPUT_INVALID"
    assert exc.details is not None and exc.details["errors"][0]["loc"] == loc


@pytest.mark.parametrize(
    ("extra", "loc"),
    [
        ({"v": math.nan}, ["v"]),
        ({"v": {"w": [0.5, -math.inf]}}, ["v", "w", 1]),
        ({"rows": [math.inf]}, ["rows", 0]),
    ],
)
async def test_nan_or_infinity_where_the_model_types_nothing_is_refused_not_nulled(
    jobs: Jobs, registry: JobRegistry, extra: dict[str, Any], loc: list[Any]
) -> None:
    """Refused as the input's fault at its path, as in a typed field (a JSON value the input
    cannot hold, as the bytes and objects above are)."""
    _declare(registry)
    exc = await _refused(jobs, "open_job", {"k": "a", **extra})
    assert exc.code == "JOB_INPUT_INVALID"
    assert exc.details is not None and exc.details["errors"][0]["loc"] == loc
    with pytest.raises(JobsError) as many:
        await jobs.enqueue_many(
            [Enqueue("open_job", {"k": "b"}), Enqueue("open_job", extra | {"k": "c"})]
        )
    assert many.value.code == "JOB_INPUT_INVALID"
    assert (await jobs.list()).jobs == []


async def test_a_null_the_caller_wrote_is_stored_as_null(jobs: Jobs, registry: JobRegistry) -> None:
    _declare(registry)
    r = await jobs.enqueue("open_job", {"k": "a", "v": None, "rows": [None, 1.5]})
    assert (await jobs.get(r.id)).input == {"k": "a", "rows": [None, 1.5], "v": None}
