"""A `-wal` or `-shm` beside the file that this user may not write (left by a `sudo mcp-jobs …`
run as root, or a mode set by hand) stopped every write with a retryable DRIVER_UNAVAILABLE
(`SQLITE_READONLY`), whose fix `ls -ld` showed the directory and the file, both writable, and
not the one in the way: a worker waited for ever. It is DATABASE_URL_INVALID naming that file,
not retried, with a fix that runs: `chmod u+w` of it where this user owns it."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest

from engine import connect
from engine.drivers.sqlite.errors import convert
from engine.drivers.sqlite.library import sqlite3
from tests.support.fix_lines import run_fix


def _readonly_refusal(path: Path) -> sqlite3.OperationalError:
    """The SQLITE_READONLY a write meets, from a connection that may not write."""

    async def make() -> None:
        jobs = await connect(f"sqlite:///{path}")
        await jobs.close()

    anyio.run(make)
    ro = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        with pytest.raises(sqlite3.OperationalError) as raised:
            ro.execute("DELETE FROM mcp_jobs_jobs")
    finally:
        ro.close()
    return raised.value


@pytest.mark.parametrize("suffix", ["-wal", "-shm"])
def test_a_wal_or_shm_this_user_may_not_write_is_refused_with_chmod(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, suffix: str
) -> None:
    path = tmp_path / "jobs.db"
    exc = _readonly_refusal(path)
    beside = Path(f"{path}{suffix}")
    beside.touch()  # an empty -wal or -shm is one SQLite makes anew
    # As root every mode is writable: the file reads as this user's and not writable.
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, m: p != str(beside) and real_access(p, m))
    error = convert(str(path), exc)
    assert error.code == "DATABASE_URL_INVALID" and not error.retryable
    assert f"{beside} is not writable" in error.cause
    monkeypatch.undo()
    beside.chmod(0o444)
    run_fix(error.fix)
    assert beside.stat().st_mode & 0o200
