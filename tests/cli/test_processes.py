"""The long-running commands as real processes: the demo end to end, and a worker that runs a job,
serves metrics and stops cleanly on SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream

import examples.shop
from engine import connect


def _clean_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MCP_JOBS_", "SHOP_"))}
    env["PYTHONUNBUFFERED"] = "1"
    return env


@pytest.mark.slow
async def test_the_demo_runs_to_exit_0_on_the_default_database(tmp_path: Path) -> None:
    with anyio.fail_after(55):
        result = await anyio.run_process(
            [sys.executable, "-m", "mcp_jobs.cli", "demo"],
            cwd=tmp_path,
            env=_clean_env(tmp_path),
            check=False,
        )
    out = result.stdout.decode()
    assert result.returncode == 0, out[-3000:] + result.stderr.decode()[-3000:]
    assert "demo finished: every step answered as expected." in out
    assert "database sqlite:///.mcp-jobs/jobs.db" in out
    assert (tmp_path / ".mcp-jobs" / "jobs.db").exists()
    for tool in ("describe_jobs", "wait_for_job", "diagnose_queue", "retry_job", "cancel_job"):
        assert f"→ {tool}" in out
    assert '"deduped": true' in out and '"state": "dead"' in out
    assert '"mode": "dry_run"' in out and '"status": "completed"' in out


async def _lines_until(
    stream: BufferedByteReceiveStream, seen: list[dict[str, Any]], wanted: Any
) -> dict[str, Any]:
    while True:
        line = await stream.receive_until(b"\n", 1 << 20)
        try:
            record = json.loads(line)
        except ValueError:
            continue
        seen.append(record)
        if wanted(record):
            return record


@pytest.mark.slow
@pytest.mark.parametrize(("event_loop", "runs_on"), [("auto", "uvloop"), ("asyncio", "asyncio")])
async def test_a_worker_process_runs_jobs_serves_metrics_and_stops_on_sigterm(
    tmp_path: Path, event_loop: str, runs_on: str
) -> None:
    url = f"sqlite:///{tmp_path}/jobs.db"
    env = {
        **_clean_env(tmp_path),
        "SHOP_DB": str(tmp_path / "shop.db"),
        "MCP_JOBS_EVENT_LOOP": event_loop,
    }
    argv = [
        sys.executable,
        "-m",
        "mcp_jobs.cli",
        "worker",
        "--app",
        "examples.shop",
        "--database-url",
        url,
        "--queues",
        "emails",
        "--metrics-port",
        "0",
        "--log-format",
        "json",
        "--log-level",
        "DEBUG",
    ]
    jobs = await connect(url)
    seen: list[dict[str, Any]] = []
    process: Process
    try:
        with anyio.fail_after(45):
            async with await anyio.open_process(
                argv, cwd=tmp_path, env=env, stderr=subprocess.PIPE
            ) as process:
                assert process.stderr is not None
                log = BufferedByteReceiveStream(process.stderr)
                started = await _lines_until(
                    log, seen, lambda r: r["message"].startswith("metrics at ")
                )
                running = await _lines_until(
                    log, seen, lambda r: r["message"].startswith("worker ")
                )
                assert running["message"].endswith(f" on {runs_on}")  # uvloop: a dev dependency
                metrics_url = started["message"].split(" ")[-1]
                assert metrics_url.startswith("http://127.0.0.1:")

                assert examples.shop.send_receipt is not None
                made = await jobs.enqueue(
                    "send_receipt", {"order_id": 7, "email": "a@b.example"}, tenant_id="acme"
                )
                await _lines_until(
                    log,
                    seen,
                    lambda r: (
                        r["message"] == "job.succeeded"
                        and r.get("job", {}).get("job_id") == made.id
                    ),
                )
                async with httpx2.AsyncClient() as http:
                    scraped = await http.get(metrics_url)
                assert scraped.status_code == 200 and "mcp_jobs" in scraped.text

                process.send_signal(signal.SIGTERM)
                assert await process.wait() == 0
        assert (await jobs.get(made.id)).state == "done"
    finally:
        await jobs.close()
