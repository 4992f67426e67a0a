"""`mcp-jobs jobs drain` runs jobs in this process: a failed job's log line and traceback are
written as the worker writes them (credentials masked, control characters escaped), not as
Python's bare last-resort output of the raw exception."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from engine import connect
from tests.cli.databases import migrated

_APP = """
from pydantic import BaseModel
from engine import job, JobContext, Retry

class Leaky(BaseModel):
    n: int

@job(queue="drain_leaks", idempotency_key=lambda i: f"n:{i.n}", retry=Retry(attempts=1))
async def drain_leaks_secret(input: Leaky, ctx: JobContext) -> None:
    raise RuntimeError("dial postgresql://app:s3cret@db/x; password=hunter2\\x1b[2J")
"""


def test_a_drained_failure_is_logged_with_its_credentials_masked(tmp_path: Path) -> None:
    (tmp_path / "drain_leaks_app.py").write_text(_APP)
    url = migrated(f"sqlite:///{tmp_path / 'jobs.db'}")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    env.pop("MCP_JOBS_APP", None)
    enqueue = "import anyio, drain_leaks_app, tests.cli.test_drain_logs_masked as t; "
    enqueue += f"anyio.run(t.enqueue, {url!r})"
    subprocess.run([sys.executable, "-c", enqueue], env=env, check=True, timeout=60)
    argv = ["jobs", "drain", "--app", "drain_leaks_app", "--database-url", url]
    done = subprocess.run(
        [sys.executable, "-m", "mcp_jobs.cli", *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert "job.dead" in done.stderr
    assert "s3cret" not in done.stderr and "hunter2" not in done.stderr, done.stderr
    assert "postgresql://app:***@db/x" in done.stderr
    assert "\x1b" not in done.stderr  # shown as \x1b, as the worker's text log shows it


async def enqueue(url: str) -> None:
    jobs = await connect(url)
    await jobs.enqueue("drain_leaks_secret", {"n": 1})
    await jobs.close()
