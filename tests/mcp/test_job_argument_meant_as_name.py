"""`job` is how an agent names a job to a tool whose argument for it is `name` (`enqueue_job
{"job": "greet", ...}`): the fix put a "<name>" slot there although the name was given. It is
moved to `name`, as `tenant` is to `tenant_id` (pause_queue, whose `job` is its own, keeps it)."""

from __future__ import annotations

import json

from engine import Jobs
from tests.mcp.conftest import OpenMcp
from tests.mcp.support import stored_rows


async def test_enqueue_job_with_job_for_name_is_mended_with_the_name(
    jobs: Jobs, open_mcp: OpenMcp
) -> None:
    async with open_mcp() as mcp:
        before = await stored_rows(jobs, "jobs")
        refused = await mcp.fails(
            "enqueue_job", {"job": "greet", "input": {"user_id": 4}}, "TOOL_ARGUMENTS_INVALID"
        )
        assert refused["retryable"] is False
        assert await stored_rows(jobs, "jobs") == before
        tool, arguments = refused["fix"].split(" ", 1)
        assert (tool, json.loads(arguments)) == (
            "enqueue_job",
            {"name": "greet", "input": {"user_id": 4}},
        )
        await mcp.ok(tool, json.loads(arguments))


async def test_list_jobs_with_job_for_name_is_mended_with_the_name(open_mcp: OpenMcp) -> None:
    async with open_mcp() as mcp:
        refused = await mcp.fails("list_jobs", {"job": "greet"}, "TOOL_ARGUMENTS_INVALID")
        assert refused["fix"] == 'list_jobs {"name": "greet"}'
