"""Running a fix line the way its reader would: through a shell, from a scratch directory, with
nothing of the test's environment but HOME and a PATH as an install by pipx leaves it: the
`mcp-jobs` command, and a `python3` that has the standard library alone, not this package or
its dependencies (no psql, pg_isready or redis-cli: slim images and Debian's server packages
lack them)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

import anyio

from engine.drivers.urls import report_fix
from engine.shell_words import for_shlex
from mcp_jobs.cli.exit_status import FAILED_EXIT, TRY_AGAIN_EXIT

BIN = Path(sys.executable).parent
COMMAND_SECONDS = 60


def _pipx_path(place: Path) -> str:
    """A directory in `place` holding `mcp-jobs` and a bare `python3` (its site-packages off)."""
    bin_dir = place / "bin"
    bin_dir.mkdir()
    (bin_dir / "mcp-jobs").symlink_to(BIN / "mcp-jobs")
    bare = bin_dir / "python3"
    bare.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -S "$@"\n')
    bare.chmod(0o755)
    return str(bin_dir)


def command_words(fix: str) -> list[str]:
    """The fix's command as words, past the `NAME=value` assignments that carry this process's
    context (an app imported earlier in the suite may declare one: `SHOP_DB=…`); a `$'…'` word
    read as bash reads it."""
    words = shlex.split(for_shlex(fix))
    while words and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", words[0], re.DOTALL):
        words.pop(0)
    return words


def run_fix(fix: str) -> str:
    """The fix's output; it must succeed. `mcp-jobs db report` on a database it cannot use
    (the fix of DRIVER_UNAVAILABLE and of a refused URL) prints its report and fails with that
    database's error (exit 75 or 1): run where the database is still away, that is its answer."""
    with tempfile.TemporaryDirectory() as place:
        scratch = Path(place) / "work"
        scratch.mkdir()
        env = {"PATH": _pipx_path(Path(place)), "HOME": os.environ.get("HOME", "/root")}
        done = subprocess.run(
            fix,
            shell=True,
            cwd=scratch,
            capture_output=True,
            text=True,
            timeout=COMMAND_SECONDS,
            env=env,
        )
    reported = command_words(fix)[1:3] == ["db", "report"] and done.stdout.strip() != ""
    failed = (FAILED_EXIT, TRY_AGAIN_EXIT)
    assert done.returncode in ((0, *failed) if reported else (0,)), (
        fix,
        done.returncode,
        done.stdout,
        done.stderr,
    )
    return done.stdout


async def report_lines(url: str) -> list[str]:
    """What `mcp-jobs db report` prints for `url`, run as its fix line."""
    output = await anyio.to_thread.run_sync(lambda: run_fix(report_fix(url)))
    return output.splitlines()


def the_line(lines: list[str], start: str) -> str:
    """The one line that begins with `start`."""
    (line,) = [line for line in lines if line.startswith(start)]
    return line


def run_script(script: str, tmp_path: Path) -> tuple[Path, Path, str]:
    """`script` run as `provoke.py` in a directory of its own under `tmp_path`, with no
    MCP_JOBS_DATABASE_URL: (that directory, another one beside it to run fixes from, stdout)."""
    here, elsewhere = tmp_path / "app", tmp_path / "elsewhere"
    here.mkdir()
    elsewhere.mkdir()
    (here / "provoke.py").write_text(script)
    env = {k: v for k, v in os.environ.items() if k != "MCP_JOBS_DATABASE_URL"}
    done = subprocess.run(
        [sys.executable, "provoke.py"],
        cwd=here,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return here, elsewhere, done.stdout
