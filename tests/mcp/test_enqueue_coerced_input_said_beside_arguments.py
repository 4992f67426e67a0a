"""An enqueue_job refused for another argument (`delay` for `delay_seconds`) whose input its job's
model takes only by coercing what the published schema refuses (`"7"` for an integer) said nothing
of the input: the agent ran the fix and was refused again, for the input. The refusal says both,
as it does for an input the model refuses outright."""

from __future__ import annotations

import pytest

from engine import Jobs
from tests.mcp.conftest import OpenMcp
from tests.mcp.support import stored_rows


@pytest.mark.parametrize("slip", [{"delay": 5}, {"jobId": "x"}])
async def test_a_coerced_input_is_named_beside_the_arguments_refusal(
    jobs: Jobs, open_mcp: OpenMcp, slip: dict[str, object]
) -> None:
    async with open_mcp() as mcp:
        before = await stored_rows(jobs, "jobs")
        refused = await mcp.call(
            "enqueue_job", {"name": "greet", "input": {"user_id": "7"}, **slip}
        )
        error = refused.data["error"]
        assert error["code"] in {"TOOL_ARGUMENTS_INVALID", "JOB_INPUT_INVALID"}
        assert error["retryable"] is False
        assert "user_id" in error["cause"], error["cause"]
        assert await stored_rows(jobs, "jobs") == before
