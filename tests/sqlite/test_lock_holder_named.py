"""A write refused because another process held the SQLite file's write lock past every busy
round said only "SQLITE_BUSY: database is locked", and its fix listed every process with the file
open: with three workers, the MCP server and the CLI on one file, five pids, the holder among
them unmarked. The error now names the process that holds the lock (pid and command line, in the
cause and as `details["holder_pid"]`), read from the lock itself."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine import ManualClock
from engine.drivers.sqlite import SqliteDriver
from engine.drivers.sqlite import connection as executor
from engine.errors import JobsError
from tests.sqlite.enqueues import START, request

# Holds the write lock (BEGIN IMMEDIATE) until its stdin closes; bounded by the test's timeout.
_HOLDER = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
sys.stdin.read()
conn.execute("ROLLBACK")
"""


@contextlib.contextmanager
def held(path: Path) -> Iterator[subprocess.Popen[str]]:
    """Another process holding the write lock of the file at `path` for the block."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "locked"  # returns once it holds the lock
        yield proc
    finally:
        proc.communicate(timeout=30)


async def test_a_write_refused_by_a_lock_held_elsewhere_names_the_holding_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(executor, "_backoff", lambda attempt: None)  # no real sleep between rounds
    path = tmp_path / "jobs.db"
    driver = SqliteDriver(str(path), clock=ManualClock(START), poll_ms=50, busy_timeout_ms=20)
    await driver.migrate()
    try:
        with held(path) as proc, pytest.raises(JobsError) as raised:
            await driver.enqueue([request(1)])
        error = raised.value
        assert error.code == "DRIVER_UNAVAILABLE"
        assert error.retryable  # a worker waits it out
        assert error.details is not None
        assert error.details["holder_pid"] == proc.pid
        assert f"process {proc.pid} " in error.cause
    finally:
        await driver.close()
