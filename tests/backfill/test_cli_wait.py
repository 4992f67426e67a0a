"""`mcp-jobs backfill NAME --write --wait N` as a deploy script runs it: a pass that fails prints
its code, cause and fix and exits 1; one whose attempt failed and waits for its retry says so
and, like any wait that ends before the pass settles, exits 124. The CLI runs as its own
process; the worker runs here, on the same SQLite file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from engine import JobRegistry, Jobs, Worker, connect
from engine.backfill import PASS_QUEUE, BackfillRegistry, Backfills
from mcp_jobs.cli.commands import WAIT_ENDED_EXIT
from tests.backfill import cli_sweeps

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path}/jobs.db"


@pytest.fixture
async def worker_jobs(url: str) -> AsyncIterator[Jobs]:
    """The worker's side: the same sweeps, declared in registries of its own."""
    registry = BackfillRegistry()
    cli_sweeps.declare(registry)
    jobs = await connect(url, registry=JobRegistry())
    Backfills(jobs, registry=registry, environment="development")
    try:
        yield jobs
    finally:
        await jobs.close()


async def _cli(url: str, *argv: str) -> subprocess.CompletedProcess[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_JOBS_")}
    env["PYTHONPATH"] = str(ROOT)
    command = [sys.executable, "-m", "mcp_jobs.cli", *argv]
    command += ["--app", "tests.backfill.cli_app", "--database-url", url]
    with anyio.fail_after(60):
        return await anyio.run_process(command, env=env, cwd=ROOT, check=False)


async def _with_worker(jobs: Jobs, url: str, *argv: str) -> subprocess.CompletedProcess[bytes]:
    """The CLI line, run while a worker serves the backfills queue."""
    worker = Worker(jobs, queues=[PASS_QUEUE], poll_ms=50)
    async with anyio.create_task_group() as tg:
        tg.start_soon(worker.run)
        done = await _cli(url, *argv)
        await worker.stop()
    return done


async def test_a_pass_that_fails_prints_its_error_and_exits_1(worker_jobs: Jobs, url: str) -> None:
    done = await _with_worker(
        worker_jobs, url, "backfill", "stalls_at_once", "--write", "--wait", "30"
    )

    assert done.returncode == 1, done
    text = (done.stdout + done.stderr).decode()
    assert "error BACKFILL_STALLED" in text
    assert 'cause: the pass of backfill "stalls_at_once"' in text
    assert "fix:   make count() select exactly the rows read() selects" in text


async def test_a_failed_pass_in_json_is_the_error_envelope(worker_jobs: Jobs, url: str) -> None:
    done = await _with_worker(
        worker_jobs, url, "backfill", "stalls_at_once", "--write", "--wait", "30", "--json"
    )

    assert done.returncode == 1, done
    envelope = json.loads(done.stdout)
    assert envelope["ok"] is False and envelope["error"]["code"] == "BACKFILL_STALLED"


async def test_a_pass_waiting_for_its_retry_says_when_and_exits_as_a_wait_that_ended(
    worker_jobs: Jobs, url: str
) -> None:
    done = await _with_worker(
        worker_jobs, url, "backfill", "fails_each_attempt", "--write", "--wait", "20"
    )

    assert done.returncode == WAIT_ENDED_EXIT == 124, done
    out = done.stdout.decode()
    assert "WARNING RETRIES_WAITING: attempt 1 of 5 of the pass failed: SweepFailure:" in out
    assert "retry at " in out

    again = await _cli(url, "backfill", "fails_each_attempt", "--runs", "--json")
    (run,) = json.loads(again.stdout)["runs"]
    assert run["status"] == "running" and "finished_at" not in run


async def test_a_wait_that_ends_before_the_pass_settles_exits_124(url: str) -> None:
    await (await connect(url)).close()  # the database, with no worker serving it
    done = await _cli(url, "backfill", "stalls_at_once", "--write", "--wait", "0.5", "--json")

    assert done.returncode == WAIT_ENDED_EXIT, done
    envelope = json.loads(done.stdout)
    assert envelope["ok"] is True and envelope["settled"] is False
