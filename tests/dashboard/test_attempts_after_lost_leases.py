"""A job whose lease ran out on each of its 3 attempts shows 3/3 on the dashboard and in
`inspect_job` (the MCP tool's operation), never 4/3: the claim that buried it ran no body and
gave its count back (engine.run_job)."""

from __future__ import annotations

import pytest

from engine import JobRegistry, Jobs, ManualClock
from mcp_jobs.operations import inspect_job
from tests.dashboard.support import Marks, browse, dashboard_for
from tests.support.lost_leases import lost_on_every_attempt

pytestmark = pytest.mark.drivers("memory", "sqlite", reason="the pages over two drivers suffice")


async def test_the_dashboard_and_inspect_job_show_the_attempts_the_job_had(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    job_id = await lost_on_every_attempt(jobs, registry, clock)
    dash = dashboard_for(jobs)
    trace = await inspect_job(dash.scope(), job_id)
    assert trace.job is not None
    assert (trace.job.state, trace.job.attempt, trace.job.max_attempts) == ("dead", 3, 3)
    assert trace.job.last_error is not None and trace.job.last_error.code == "JOB_SLOT_LOST"
    async with browse(dash) as http:
        (row,) = Marks((await http.get("/jobs")).text).all("job-row")
        page = (await http.get(f"/jobs/{job_id}")).text
    assert "3/3" in row.text and "4/3" not in row.text
    assert "3 of 3" in page and "4 of 3" not in page
