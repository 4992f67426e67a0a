"""A client lent to the server (`build_server(settings, jobs)`) carries the engine's own context
into its errors' fix lines (engine/fix_lines.py) when the Python API raises them; served, its
errors get the server's context alone (mcp_jobs/fix_context.py), exactly as before."""

from __future__ import annotations

from engine import Jobs
from engine.backfill import BackfillRegistry
from engine.fix_lines import as_raised
from mcp_jobs.config import Settings
from mcp_jobs.fix_context import FixContext
from tests.mcp.support import serve

BARE = "mcp-jobs jobs ls --json"


async def test_a_served_error_has_the_servers_context_not_the_clients(
    jobs: Jobs, mode: str
) -> None:
    assert as_raised(jobs.fix_context, BARE) != BARE  # the Python API writes its own
    settings = Settings()
    async with serve(jobs, mode, settings, backfills=BackfillRegistry()) as mcp:
        error = await mcp.fails("retry_job", {"job_id": "nosuch"}, "JOB_NOT_FOUND")
    assert error["fix"] == FixContext.of(settings, face="mcp").qualify(BARE)
