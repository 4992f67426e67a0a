"""`mcp-jobs jobs ls` and `jobs show` print 3/3 for a job whose lease ran out on each of its 3
attempts, never 4/3: the claim that buried it ran no body and gave its count back
(engine.run_job)."""

from __future__ import annotations

import anyio
import pytest

from engine import JobRegistry, ManualClock, connect
from tests.cli.support import run
from tests.support.lost_leases import lost_on_every_attempt


def _dead_job(url: str) -> str:
    async def make() -> str:
        registry, clock = JobRegistry(), ManualClock()
        jobs = await connect(url, clock=clock, registry=registry)
        try:
            return await lost_on_every_attempt(jobs, registry, clock)
        finally:
            await jobs.close()

    return anyio.run(make)


def test_jobs_ls_and_jobs_show_print_the_attempts_the_job_had(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    job_id = _dead_job(url)
    code, shown = run(capsys, "jobs", "show", job_id, "--database-url", url, "--json")
    assert code == 0 and (shown["job"]["attempt"], shown["job"]["max_attempts"]) == (3, 3)
    code, out = run(capsys, "jobs", "show", job_id, "--database-url", url)
    assert code == 0 and "[dead]  attempt 3/3 " in out.splitlines()[0], out
    code, out = run(capsys, "jobs", "ls", "--database-url", url)
    (row,) = [line for line in out.splitlines() if line.startswith(job_id)]
    assert code == 0 and row.split()[5] == "3/3", out
