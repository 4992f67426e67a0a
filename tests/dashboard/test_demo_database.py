"""#26's acceptance: `mcp-jobs dashboard`, started where `mcp-jobs demo` ran with no database
named, opens the demo's database and shows the demo's jobs."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
import httpx2
import pytest

from engine import connect
from tests.dashboard.support import Marks
from tests.support.dashboard_process import run_dashboard

DEMO_BOUND_S = 55  # a bound on the whole run, never a pause

pytestmark = pytest.mark.slow


def test_the_dashboard_shows_the_demo_s_jobs(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MCP_JOBS_", "SHOP_"))}

    async def demo() -> int:
        with anyio.fail_after(DEMO_BOUND_S):
            done = await anyio.run_process(
                [sys.executable, "-m", "mcp_jobs.cli", "demo"], cwd=tmp_path, env=env, check=False
            )
        return done.returncode

    assert anyio.run(demo) == 0

    async def listed() -> list[str]:
        # Where the default database lives for a process started in `tmp_path`.
        jobs = await connect(f"sqlite:///{tmp_path}/.mcp-jobs/jobs.db")
        try:
            return [j.id for j in (await jobs.list(limit=50)).jobs]
        finally:
            await jobs.close()

    expected = anyio.run(listed)
    assert expected  # the demo left jobs behind
    with run_dashboard(None, read_only=True, cwd=tmp_path, app="examples.shop") as dashboard:
        page = httpx2.get(dashboard.at("jobs"), timeout=30)
    assert page.status_code == 200
    shown = [m.attrs["data-job-id"] for m in Marks(page.text).all("job-row")]
    assert shown == expected
