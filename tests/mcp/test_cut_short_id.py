"""An agent that cut a job id short: JOB_NOT_FOUND's next_call reads the one job whose id begins
so (a read runs as given); a write so mended is shown in the fix only, never run for it."""

from __future__ import annotations

import json

from engine import Jobs
from tests.mcp.conftest import OpenMcp


async def test_an_id_cut_short_is_read_by_its_whole_id(jobs: Jobs, open_mcp: OpenMcp) -> None:
    job = (await jobs.enqueue("greet", {"user_id": 1})).id
    other = (await jobs.enqueue("greet", {"user_id": 2})).id
    cut = next(n for n in range(12, 32) if job[:n] != other[:n])
    async with open_mcp() as mcp:
        refused = await mcp.fails("inspect_job", {"job_id": job[:cut]}, "JOB_NOT_FOUND")
        assert refused["next_call"] == {"tool": "inspect_job", "arguments": {"job_id": job}}
        shown = await mcp.ok(refused["next_call"]["tool"], refused["next_call"]["arguments"])
        assert shown["job"]["id"] == job
        refused = await mcp.fails("cancel_job", {"job_id": job[:cut]}, "JOB_NOT_FOUND")
        assert refused.get("next_call") is None  # a write on what was found: shown only
        tool, arguments = refused["fix"].split(" ", 1)
        assert (tool, json.loads(arguments)) == ("cancel_job", {"job_id": job})
    assert (await jobs.get(job)).state == "ready"
