"""enqueue_job with JSON text `NaN` or `Infinity` for a number the job's model bounds: refused
JOB_INPUT_INVALID at its path as no finite number, as the Python API refuses it (it read
"Input should be less than or equal to 600"). Sent raw: the SDK's client turns NaN into null."""

from __future__ import annotations

import json
from typing import Any

import pytest

from engine import Jobs
from engine.declare import JobRegistry
from tests.engine.test_enqueue_input_non_finite_bound import CASES, FINITE, declare_nap
from tests.mcp.conftest import OpenMcp
from tests.mcp.test_tasks import raw

pytestmark = pytest.mark.drivers("memory", "sqlite", reason="input checks, not storage")


def _strict_json(text: str) -> Any:
    def refuse(constant: str) -> Any:
        raise ValueError(f"{constant} in {text}")

    return json.loads(text, parse_constant=refuse)


async def test_a_non_finite_number_past_a_bound_is_said_as_the_python_api_says_it(
    jobs: Jobs, registry: JobRegistry, open_mcp: OpenMcp
) -> None:
    declare_nap(registry)
    async with open_mcp() as mcp:
        for given, loc in CASES:
            arguments = {"name": "nap", "input": given}
            result = await raw(
                mcp.client, "tools/call", {"name": "enqueue_job", "arguments": arguments}
            )
            envelope = result["structuredContent"]
            assert _strict_json(json.dumps(envelope)) == envelope
            error = envelope["error"]
            said = f"{given}: {error}"
            assert error["code"] == "JOB_INPUT_INVALID" and error["retryable"] is False, said
            (entry,) = error["details"]["errors"]
            assert entry == {"loc": loc, "msg": FINITE, "type": "finite_number"}, said
            assert f"at {'.'.join(map(str, loc))}: {FINITE}" in error["cause"], said
            assert "less than" not in error["cause"] and "greater than" not in error["cause"]
    assert (await jobs.list()).jobs == []
