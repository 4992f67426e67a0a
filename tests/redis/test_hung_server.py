"""A Redis that accepts connections and answers nothing (SIGSTOP: stopped, or blocked, or
overloaded) bounds every call: it fails as DRIVER_UNAVAILABLE with the report's fix, and the
report tells it apart from a server that is not running (refused connection: start it). On
servers these tests start, stop and kill themselves."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from engine import ManualClock
from engine.driver_errors import DriverUnavailableError
from engine.drivers import open_driver
from engine.drivers.base import REPORT, require
from engine.drivers.urls import report_fix
from mcp_jobs.cli.exit_status import TRY_AGAIN_EXIT
from tests.redis.server import own_server

pytest.importorskip("redis", reason="the redis extra is not installed")

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
# The command's own bound must end it well inside this (the test's is 60 s).
COMMAND_SECONDS = 45


def _cli(*words: str) -> subprocess.CompletedProcess[str]:
    """`mcp-jobs` of this checkout, as an operator or an agent's shell runs it."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "mcp_jobs.cli", *words],
        capture_output=True,
        text=True,
        timeout=COMMAND_SECONDS,
        env=env,
        cwd=ROOT,
    )


async def test_a_call_on_a_hung_server_fails_unavailable_with_the_report_fix(
    tmp_path: Path,
) -> None:
    with own_server(tmp_path) as server:
        driver = open_driver(server.url, clock=ManualClock(), reply_timeout_s=0.5)
        try:
            await driver.migrate()
            server.pause()
            with anyio.fail_after(30), pytest.raises(DriverUnavailableError) as refused:
                await driver.stats()
            server.resume()
        finally:
            await driver.close()
    assert refused.value.fix == report_fix(server.url)
    assert "no answer in time" in refused.value.cause


async def test_a_cli_command_on_a_hung_server_ends_and_says_so(tmp_path: Path) -> None:
    with own_server(tmp_path) as server:
        server.pause()
        done = await anyio.to_thread.run_sync(
            lambda: _cli("jobs", "stats", "--database-url", server.url)
        )
        server.resume()
    assert done.returncode == TRY_AGAIN_EXIT, (done.stdout, done.stderr)  # retryable
    assert "error DRIVER_UNAVAILABLE" in done.stderr
    assert f"fix:   {report_fix(server.url)}" in done.stderr


async def test_the_report_tells_a_hung_server_from_one_not_running(tmp_path: Path) -> None:
    with own_server(tmp_path) as server:
        driver = open_driver(server.url, clock=ManualClock(), connect_timeout_s=0.5)
        try:
            server.pause()
            hung = await require(driver, REPORT).server_report()
            server.resume()
            server.kill()
            gone = await require(driver, REPORT).server_report()
        finally:
            await driver.close()
    assert not hung.reachable and not gone.reachable
    assert "did not answer in time" in hung.lines[0]
    assert "not answering: stopped" in hung.lines[1] and "start Redis" not in hung.lines[1]
    assert "ping" in hung.lines[1]
    assert gone.lines[1].startswith("start Redis at 127.0.0.1:")
