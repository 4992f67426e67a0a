"""`mcp-jobs jobs drain` runs jobs in this process: a failed job's log line and traceback are
written as the worker writes them (credentials masked, control characters escaped), not as
Python's bare last-resort output of the raw exception. A drain that ran a job to a dead or failed
end exits JOBS_FAILED_EXIT, its notice naming the job with a line that shows it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from engine import connect
from mcp_jobs.cli.exit_status import JOBS_FAILED_EXIT
from tests.cli.databases import migrated
from tests.support.fix_lines import run_fix

_APP = """
from pydantic import BaseModel
from engine import job, JobContext, Permanent, Retry

class Leaky(BaseModel):
    n: int

@job(queue="drain_leaks", idempotency_key=lambda i: f"n:{i.n}", retry=Retry(attempts=1))
async def drain_leaks_secret(input: Leaky, ctx: JobContext) -> None:
    raise RuntimeError("dial postgresql://app:s3cret@db/x; password=hunter2\\x1b[2J")

@job(queue="drain_leaks", idempotency_key=lambda i: f"n:{i.n}")
async def drain_refused(input: Leaky, ctx: JobContext) -> None:
    raise Permanent("no such customer")

@job(queue="drain_leaks", idempotency_key=lambda i: f"n:{i.n}")
async def drain_fine(input: Leaky, ctx: JobContext) -> None:
    return None
"""


def _drained(
    tmp_path: Path, *names: str, json_out: bool = False
) -> subprocess.CompletedProcess[str]:
    """`jobs drain` in a process of its own, after one job of each of `names` is enqueued."""
    (tmp_path / "drain_leaks_app.py").write_text(_APP)
    url = migrated(f"sqlite:///{tmp_path / 'jobs.db'}")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    env.pop("MCP_JOBS_APP", None)
    enqueue = "import anyio, drain_leaks_app, tests.cli.test_drain_logs_masked as t; "
    enqueue += f"anyio.run(t.enqueue, {url!r}, {names!r})"
    subprocess.run([sys.executable, "-c", enqueue], env=env, check=True, timeout=60)
    argv = ["jobs", "drain", "--app", "drain_leaks_app", "--database-url", url]
    return subprocess.run(
        [sys.executable, "-m", "mcp_jobs.cli", *argv, *(["--json"] if json_out else [])],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )


def test_a_drained_failure_is_logged_with_its_credentials_masked(tmp_path: Path) -> None:
    done = _drained(tmp_path, "drain_leaks_secret")
    assert done.returncode == JOBS_FAILED_EXIT, done.stderr
    assert "job.dead" in done.stderr
    assert "s3cret" not in done.stderr and "hunter2" not in done.stderr, done.stderr
    assert "postgresql://app:***@db/x" in done.stderr
    assert "\x1b" not in done.stderr  # shown as \x1b, as the worker's text log shows it


def test_a_drain_whose_jobs_ended_badly_names_them_and_exits_so(tmp_path: Path) -> None:
    """Exit 0 let a test or deploy script go on as if the work had succeeded; the text said
    "1 dead" and nothing showed which."""
    done = _drained(tmp_path, "drain_leaks_secret", "drain_refused", "drain_fine", json_out=True)
    assert done.returncode == JOBS_FAILED_EXIT, done.stderr
    answer = json.loads(done.stdout)
    assert answer["ok"] is True
    assert answer["outcomes"] == {"dead": 1, "failed": 1, "succeeded": 1}
    notices = {n["code"]: n for n in answer["notices"]}
    assert set(notices) == {"DEAD_LETTERS", "JOBS_FAILED"}
    dead, failed = notices["DEAD_LETTERS"], notices["JOBS_FAILED"]
    assert "drain_leaks_secret" in dead["cause"] and "no such customer" in failed["cause"]
    assert dead["next_call"] == {"tool": "inspect_job", "arguments": {"job_id": dead["job_ids"][0]}}
    shown = json.loads(run_fix(dead["fix"]))  # as given, from another directory
    assert shown["job"]["id"] == dead["job_ids"][0] and shown["job"]["state"] == "dead"


def test_a_drain_whose_jobs_succeeded_exits_0(tmp_path: Path) -> None:
    done = _drained(tmp_path, "drain_fine")
    assert done.returncode == 0, done.stderr
    assert "WARNING" not in done.stdout, done.stdout


async def enqueue(url: str, names: tuple[str, ...]) -> None:
    jobs = await connect(url)
    for n, name in enumerate(names):
        await jobs.enqueue(name, {"n": n})
    await jobs.close()
