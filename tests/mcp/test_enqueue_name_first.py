"""An enqueue_job call the strict model refuses whose `name` no job has: JOB_UNKNOWN first (it
also says what else was wrong), so its fix never keeps a name the next call is refused for."""

from __future__ import annotations

import json

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
        # Written as the tool's own refusals are: a command runs as given (H3: it lacked the
        # database), a memory store's is the tool call.
        assert "--database-url" in error["fix"] or error["fix"].startswith("describe_jobs")
        # A slip of the keys: the fix is the call with the name meant and a placeholder input,
        # shown, not offered to run (a write mended by a guess).
        slip = await mcp.fails("enqueue_job", {"name": "gret"}, "JOB_UNKNOWN")
        assert slip["details"]["meant"] == "greet"
        assert slip["fix"].startswith('enqueue_job {"name": "greet", "input": '), slip
        assert slip.get("next_call") is None
        # A registered name keeps the refusal of what is wrong with the call.
        await mcp.fails("enqueue_job", {"name": "greet"}, "TOOL_ARGUMENTS_INVALID")
    assert (await jobs.list()).jobs == []


async def test_an_input_its_job_refuses_is_mended_with_the_other_arguments(
    jobs: Jobs, open_mcp: OpenMcp
) -> None:
    """The fix left out `delay` for delay_seconds but kept the input's misspelt field: the call
    as given was refused next for the input (two hops)."""
    async with open_mcp() as mcp:
        given = {"name": "greet", "input": {"userid": 7}, "delay": 5}
        error = await mcp.fails("enqueue_job", given, "JOB_INPUT_INVALID")
        assert "argument delay" in error["cause"] and "userid" in error["cause"], error
        mended = {"name": "greet", "input": {"user_id": 7}, "delay_seconds": 5}
        assert error["fix"] == f"enqueue_job {json.dumps(mended)}", error
        assert (await jobs.list()).jobs == []
        # The fix, as given, enqueues.
        await mcp.ok("enqueue_job", mended)
        # An input no rename mends: the arguments' refusal says what else is wrong with it.
        error = await mcp.fails(
            "enqueue_job", {**given, "input": {"user_id": "x"}}, "TOOL_ARGUMENTS_INVALID"
        )
        assert 'and input for "greet" is invalid at user_id' in error["cause"], error
    assert len((await jobs.list()).jobs) == 1


async def test_a_mended_call_whose_input_is_refused_is_not_offered_to_run(
    jobs: Jobs, open_mcp: OpenMcp
) -> None:
    """exploreZ: with an input no rename mends, the refusal of the other arguments offered their
    mended call as `next_call`, which was refused next for the input; and a value out of range
    (a priority, a delay) said nothing of the input at all."""
    async with open_mcp() as mcp:
        bad = {"name": "greet", "input": {"user_id": "x"}}
        for slip in (
            {"delay": 5},
            {"priority": 11},
            {"delay_seconds": -1},
            {"delay_seconds": 10**12},
            {"priority": "3"},
            {"delay_seconds": "5"},
            {"on_conflict": "Error"},
            {"name": ["greet"]},
        ):
            answer = await mcp.call("enqueue_job", {**bad, **slip})
            assert answer.is_error, (slip, answer.data)
            error = answer.data["error"]
            assert "invalid at user_id" in error["cause"], (slip, error)
            # exploreB2: the fix showed the mended call with the same input, refused next.
            assert error.get("next_call") == {
                "tool": "describe_jobs",
                "arguments": {"name": "greet"},
            }, (slip, error)
            assert error["fix"].startswith("describe_jobs") or "jobs describe" in error["fix"]
    assert (await jobs.list()).jobs == []
