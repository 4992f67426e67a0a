"""A list of jobs (`list_jobs`) shows each failure's code, cause and fix, not the body's stored
traceback: up to 4 KB a job, a page of 200 dead jobs answered an agent close to a megabyte.
The traceback stays one call away, on `inspect_job` (the summary's fix and next_call)."""

from __future__ import annotations

import pytest

from engine import Jobs, Worker
from tests.mcp.conftest import OpenMcp


@pytest.mark.drivers("memory", "sqlite", reason="the answer's shape does not depend on the driver")
async def test_a_listed_failure_leaves_its_traceback_to_inspect_job(
    jobs: Jobs, open_mcp: OpenMcp
) -> None:
    async with open_mcp() as mcp:
        enqueued = await mcp.ok("enqueue_job", {"name": "flaky", "input": {"key": "tb"}})
        await Worker(jobs).run_until_idle()  # its first attempt fails: delayed, error kept
        listed = await mcp.ok("list_jobs", {"name": "flaky"})
        (summary,) = listed["jobs"]
        assert summary["id"] == enqueued["job_id"]
        error = summary["last_error"]
        assert error["code"] == "JOB_FAILED" and "upstream down for tb" in error["cause"]
        assert error["next_call"]["tool"] == "inspect_job"
        assert "traceback" not in (error.get("details") or {}), error["details"]
        inspected = await mcp.ok("inspect_job", {"job_id": enqueued["job_id"]})
        assert "upstream down" in inspected["job"]["last_error"]["details"]["traceback"]
