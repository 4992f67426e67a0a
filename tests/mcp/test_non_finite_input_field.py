"""enqueue_job with NaN or Infinity in the input (JSON text a raw JSON-RPC client can send, which
Python reads as numbers): JOB_INPUT_INVALID naming the field, "finite number", non-retryable,
whether the field bounds the number or not. A float field with no bound was INVALID_ARGUMENT
(the storable rule's "nan is not a JSON number", its fix an "<input>" slot)."""

from __future__ import annotations

import math

import pytest
from pydantic import BaseModel, Field

from engine import JobContext, JobRegistry, Jobs, job
from tests.mcp.conftest import OpenMcp
from tests.mcp.test_tasks import raw

pytestmark = pytest.mark.drivers("memory", "sqlite", reason="input checks, not storage")


class Sample(BaseModel):
    free: float = 0
    capped: float = Field(default=0, le=600)


@pytest.mark.parametrize("field", ["free", "capped"])
@pytest.mark.parametrize("number", [math.nan, math.inf, -math.inf])
async def test_a_non_finite_number_in_any_float_field_is_job_input_invalid(
    jobs: Jobs, registry: JobRegistry, open_mcp: OpenMcp, field: str, number: float
) -> None:
    @job(idempotency_key=lambda i: "k", registry=registry)
    async def sample(input: Sample, ctx: JobContext) -> None:
        return None

    async with open_mcp() as mcp:
        arguments = {"name": "sample", "input": {field: number}}
        result = await raw(
            mcp.client, "tools/call", {"name": "enqueue_job", "arguments": arguments}
        )
        error = result["structuredContent"]["error"]
        assert error["code"] == "JOB_INPUT_INVALID" and error["retryable"] is False, error
        assert f"at {field}: Input should be a finite number" in error["cause"], error
        (entry,) = error["details"]["errors"]
        assert entry["loc"] == [field] and entry["type"] == "finite_number", entry
    assert (await jobs.list()).jobs == []
