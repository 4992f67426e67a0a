"""NO_LIVE_WORKERS on a `memory://` server: no worker line (a worker would open a private store
of its own that never sees this server's jobs) but how to run one that shares the jobs; and the
notice lists the job it is about."""

from __future__ import annotations

from engine import Jobs
from mcp_jobs.config import Settings
from tests.mcp.conftest import OpenMcp


async def test_a_memory_server_gives_no_worker_line_that_cannot_see_its_jobs(
    jobs: Jobs, open_mcp: OpenMcp
) -> None:
    async with open_mcp(Settings(database_url="memory://")) as mcp:
        made = await mcp.ok("enqueue_job", {"name": "greet", "input": {"user_id": 1}})
        (notice,) = [n for n in made["notices"] if n["code"] == "NO_LIVE_WORKERS"]
        assert "mcp-jobs worker" not in notice["fix"] and "memory://" in notice["fix"]
        assert "sqlite:///" in notice["fix"] and "next_call" not in notice
        diagnosis = await mcp.ok("diagnose_queue", {})
        fixes = [f["fix"] for f in diagnosis["findings"] if f["code"] == "NO_LIVE_WORKERS"]
        assert fixes and all("mcp-jobs worker" not in fix for fix in fixes)


async def test_the_no_live_workers_notice_lists_the_job_it_names(
    jobs: Jobs, open_mcp: OpenMcp
) -> None:
    async with open_mcp() as mcp:
        made = await mcp.ok("enqueue_job", {"name": "greet", "input": {"user_id": 1}})
        (notice,) = [n for n in made["notices"] if n["code"] == "NO_LIVE_WORKERS"]
        assert notice["job_ids"] == [made["job_id"]]
        assert made["job_id"] in notice["cause"]
        assert "mcp-jobs worker" in notice["fix"]
