"""Several processes on one SQLite file: enqueuers, workers, a crash. Real processes, real time
(short leases), every wait bounded and watching for a condition."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from engine import connect
from engine.drivers.sqlite.library import sqlite3
from tests.sqlite.proc_app import REGISTRY

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def spawn(*args: str, logdir: Path, hang: bool = False) -> subprocess.Popen[str]:
    env = {**os.environ, "PROC_APP_LOGDIR": str(logdir), "PROC_APP_HANG": "1" if hang else "0"}
    return subprocess.Popen(
        [sys.executable, "-m", "tests.sqlite.proc_app", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(proc: subprocess.Popen[str], timeout: float = 60) -> str:
    """Wait for a child; it must exit 0. Returns its stderr."""
    err: str
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        pytest.fail(f"child {proc.args!r} did not finish in {timeout} s:\n{err[-3000:]}")
    assert proc.returncode == 0, err[-3000:]
    return err


def wait_until(condition: str, check: Callable[[], bool], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {condition}")
        time.sleep(0.02)


def test_two_enqueuers_and_two_workers_run_every_job_exactly_once(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/jobs.db"
    total = 1_000
    procs = [
        spawn("work", url, str(total), logdir=tmp_path),
        spawn("work", url, str(total), logdir=tmp_path),
        spawn("enqueue", url, "0", str(total // 2), logdir=tmp_path),
        spawn("enqueue", url, str(total // 2), str(total // 2), logdir=tmp_path),
    ]
    errors = [finish(p, timeout=80) for p in procs]
    for err in errors:
        assert "database is locked" not in err
        assert "Traceback" not in err, err[-3000:]
    runs: Counter[int] = Counter()
    per_worker: list[int] = []
    for log in tmp_path.glob("exec-*.log"):
        lines = [int(line) for line in log.read_text().split()]
        per_worker.append(len(lines))
        runs.update(lines)
    assert sorted(runs) == list(range(total))
    assert set(runs.values()) == {1}, [n for n, c in runs.items() if c > 1][:10]
    conn = sqlite3.connect(tmp_path / "jobs.db")
    rows = conn.execute(
        "SELECT state, attempt, count(*) FROM mcp_jobs_jobs GROUP BY 1, 2"
    ).fetchall()
    conn.close()
    assert rows == [("done", 1, total)]


async def test_a_worker_killed_mid_job_is_finished_by_another_without_rerunning_steps(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path}/jobs.db"
    jobs = await connect(url, registry=REGISTRY)
    try:
        r = await jobs.enqueue("three_steps", {"order": "A-1"})
    finally:
        await jobs.close()
    steps_log = tmp_path / "steps.log"

    def lines() -> list[str]:
        return steps_log.read_text().splitlines() if steps_log.exists() else []

    doomed = spawn("steps", url, "1000", logdir=tmp_path, hang=True)
    try:
        wait_until("step three to start", lambda: any(x.startswith("three-start") for x in lines()))
    finally:
        doomed.send_signal(signal.SIGKILL)
        doomed.communicate(timeout=30)
    assert doomed.returncode == -signal.SIGKILL
    survivor = spawn("steps", url, "1000", logdir=tmp_path)
    err = finish(survivor, timeout=60)
    assert "database is locked" not in err
    by_step = Counter(line.split()[0] for line in lines())
    pids = {line.split()[0]: line.split()[1] for line in lines()}
    assert by_step == {"one": 1, "two": 1, "three-start": 2, "three": 1}
    assert pids["one"] == pids["two"] == str(doomed.pid)
    assert pids["three"] == str(survivor.pid)
    jobs = await connect(url, registry=REGISTRY)
    try:
        record = await jobs.get(r.id)
        trace = await jobs.trace(r.id)
    finally:
        await jobs.close()
    assert record.state == "done" and record.output == "three"
    assert record.attempt == 2  # the lease expired once; the second claim finished it
    assert [(s.name, s.status) for s in trace.steps] == [
        ("one", "completed"),
        ("two", "completed"),
        ("three", "completed"),
    ]


def test_processes_migrating_one_new_file_at_once_apply_each_version_once(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/jobs.db"
    procs = [spawn("migrate", url, logdir=tmp_path) for _ in range(3)]
    for p in procs:
        assert "database is locked" not in finish(p)
    conn = sqlite3.connect(tmp_path / "jobs.db")
    versions = conn.execute(
        "SELECT version, count(*) FROM mcp_jobs_migrations GROUP BY 1"
    ).fetchall()
    conn.close()
    assert versions and all(count == 1 for _, count in versions)
