"""An enqueue_job call the strict model refuses whose `name` no job has: JOB_UNKNOWN first (it
also says what else was wrong), so its fix never keeps a name the next call is refused for."""

from __future__ import annotations

from engine import Jobs
from tests.mcp.conftest import OpenMcp


async def test_a_name_no_job_has_is_refused_before_the_input_it_lacks(
    jobs: Jobs, open_mcp: OpenMcp
) -> None:
    async with open_mcp() as mcp:
        # The tool's own name for the job's: nothing plainly meant, so the fix lists the jobs.
        error = await mcp.fails("enqueue_job", {"name": "enqueue_job"}, "JOB_UNKNOWN")
        assert "registered: " in error["cause"] and "input" in error["cause"], error
        assert error["next_call"] == {"tool": "describe_jobs", "arguments": {}}
        assert "enqueue_job" not in error["fix"], error
        # A slip of the keys: the fix is the call with the name meant and a placeholder input,
        # shown, not offered to run (a write mended by a guess).
        slip = await mcp.fails("enqueue_job", {"name": "gret"}, "JOB_UNKNOWN")
        assert slip["details"]["meant"] == "greet"
        assert slip["fix"].startswith('enqueue_job {"name": "greet", "input": '), slip
        assert slip.get("next_call") is None
        # A registered name keeps the refusal of what is wrong with the call.
        await mcp.fails("enqueue_job", {"name": "greet"}, "TOOL_ARGUMENTS_INVALID")
    assert (await jobs.list()).jobs == []
