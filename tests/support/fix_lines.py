"""Running a fix line the way its reader would: through a shell, from a scratch directory, with
nothing of the test's environment but HOME and a PATH that holds this project's scripts alone
(no psql, pg_isready or redis-cli: slim images and Debian's server packages lack them)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import anyio

from engine.drivers.urls import report_fix

BIN = Path(sys.executable).parent
COMMAND_SECONDS = 60


def run_fix(fix: str) -> str:
    """The fix's output; it must succeed."""
    env = {"PATH": str(BIN), "HOME": os.environ.get("HOME", "/root")}
    with tempfile.TemporaryDirectory() as scratch:
        done = subprocess.run(
            fix,
            shell=True,
            cwd=scratch,
            capture_output=True,
            text=True,
            timeout=COMMAND_SECONDS,
            env=env,
        )
    assert done.returncode == 0, (fix, done.returncode, done.stdout, done.stderr)
    return done.stdout


async def report_lines(url: str) -> list[str]:
    """What `mcp-jobs db report` prints for `url`, run as its fix line."""
    output = await anyio.to_thread.run_sync(lambda: run_fix(report_fix(url)))
    return output.splitlines()


def the_line(lines: list[str], start: str) -> str:
    """The one line that begins with `start`."""
    (line,) = [line for line in lines if line.startswith(start)]
    return line
