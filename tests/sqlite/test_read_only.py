"""A database file that cannot be written (a read-only mount, a mode no retry changes) is
DATABASE_URL_INVALID naming it, not retried, with a fix that runs: a copy in a writable place,
or `chmod u+w` of what this user owns."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from engine import connect
from engine.drivers.sqlite.errors import convert
from engine.drivers.sqlite.library import sqlite3
from tests.support.fix_lines import run_fix


def _make(path: Path) -> None:
    async def make() -> None:
        jobs = await connect(f"sqlite:///{path}")
        await jobs.close()

    anyio.run(make)


def test_a_file_this_user_may_not_write_is_refused_with_chmod(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "jobs.db"
    _make(path)
    ro = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    with pytest.raises(sqlite3.OperationalError) as raised:
        ro.execute("DELETE FROM mcp_jobs_jobs")
    ro.close()
    # As root every mode is writable: the file reads as this user's and not writable.
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, m: p != str(path) and real_access(p, m))
    error = convert(str(path), raised.value)
    assert error.code == "DATABASE_URL_INVALID" and not error.retryable
    assert f"{path} is not writable" in error.cause
    assert "chmod" in error.fix and str(path) in error.fix
    monkeypatch.undo()
    path.chmod(0o444)
    run_fix(error.fix)
    assert path.stat().st_mode & 0o200


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None, reason="a read-only mount needs root"
)
def test_a_file_on_a_read_only_mount_is_refused_with_a_copy_that_runs(tmp_path: Path) -> None:
    place = tmp_path / "ro"
    place.mkdir()
    path = place / "jobs.db"
    _make(path)
    ls = f"{Path(sys.executable).parent}/mcp-jobs jobs ls --json --database-url sqlite:///{path}"
    script = f"mount --bind {place} {place} && mount -o remount,bind,ro {place} && {ls}"
    env = {**os.environ, "HOME": str(tmp_path / "home")}
    done = subprocess.run(
        ["unshare", "-m", "sh", "-c", script], capture_output=True, text=True, env=env, timeout=60
    )
    if not done.stdout.lstrip().startswith("{"):  # unshare or mount refused: nothing ran
        pytest.skip(f"no read-only mount here: {done.stderr.strip()[:300]}")
    error = json.loads(done.stdout)["error"]
    assert error["code"] == "DATABASE_URL_INVALID" and error["retryable"] is False
    assert f"{place} is on a filesystem mounted read-only" in error["cause"]
    (tmp_path / "home").mkdir()
    run_fix(error["fix"])
    assert (tmp_path / "home" / "mcp-jobs" / "jobs.db").exists()
