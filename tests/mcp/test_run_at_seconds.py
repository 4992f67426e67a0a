"""enqueue_job with run_at in epoch seconds (1798000000 meant as 2026-12-23, read as January
1970) is refused, and its next_call is the same call in milliseconds, which runs as given."""

from __future__ import annotations

import pytest

from engine import Jobs
from tests.mcp.conftest import OpenMcp

pytestmark = pytest.mark.drivers("memory", reason="the engine's reading of run_at, one driver")

SECONDS = 1_798_000_000


async def test_run_at_in_seconds_is_refused_with_the_call_in_milliseconds(
    jobs: Jobs, open_mcp: OpenMcp
) -> None:
    greet = {"name": "greet", "input": {"user_id": 7}}
    async with open_mcp() as mcp:
        for given, meant in ((SECONDS, SECONDS * 1000), (str(SECONDS), str(SECONDS * 1000))):
            error = await mcp.fails("enqueue_job", {**greet, "run_at": given}, "INVALID_ARGUMENT")
            assert "epoch seconds" in error["cause"], error
            assert error["next_call"] == {
                "tool": "enqueue_job",
                "arguments": {**greet, "run_at": meant},
            }
        assert (await jobs.list()).jobs == []
        later = await mcp.ok("enqueue_job", {**greet, "run_at": SECONDS * 1000})
        assert later["state"] == "delayed"
        # Neither plausible milliseconds nor seconds: the range's low end, which runs now.
        low = {**greet, "input": {"user_id": 8}, "run_at": 10**12}
        zero = await mcp.fails("enqueue_job", {**low, "run_at": 0}, "INVALID_ARGUMENT")
        assert zero["next_call"] == {"tool": "enqueue_job", "arguments": low}
        assert (await mcp.ok("enqueue_job", low))["state"] == "ready"
