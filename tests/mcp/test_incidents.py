"""An INTERNAL error's fix shows its traceback as given: `cat` of a file kept per correlation id
(mcp_jobs.incidents), the owner's alone, the newest few hundred kept. Where no file can be
written, the fix sets a directory that can be."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from mcp_jobs import incidents
from mcp_jobs.incidents import INCIDENT_DIR_ENV
from mcp_jobs.operations.envelope import error_payload


def _crash(message: str) -> BaseException:
    try:
        raise RuntimeError(message)
    except RuntimeError as exc:
        return exc


def _run(fix: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(fix, shell=True, capture_output=True, text=True, timeout=30)


def test_the_fix_shows_the_traceback_kept_for_the_owner_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "it's kept here"  # a quote and a space: the fix quotes the path
    monkeypatch.setenv(INCIDENT_DIR_ENV, str(folder))
    payload = error_payload(_crash("the disk said no"), where="tool list_jobs")
    correlation_id = payload.details["correlation_id"]
    assert payload.code == "INTERNAL" and correlation_id in payload.cause
    assert "the disk said no" not in payload.cause + payload.fix  # the result leaks nothing
    shown = _run(payload.fix)
    assert shown.returncode == 0, (payload.fix, shown.stderr)
    assert f"correlation_id: {correlation_id}" in shown.stdout
    assert "where: tool list_jobs" in shown.stdout
    assert "RuntimeError: the disk said no" in shown.stdout
    kept = folder / f"{correlation_id}.txt"
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700


def test_only_the_newest_incidents_are_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(INCIDENT_DIR_ENV, str(tmp_path))
    monkeypatch.setattr(incidents, "KEEP", 3)
    for n in range(5):
        stale = tmp_path / f"old{n}.txt"
        stale.write_text("old")
        os.utime(stale, ns=(n, n))  # older than anything written now
    payload = error_payload(_crash("boom"), where="tool queue_stats")
    left = {p.name for p in tmp_path.iterdir()}
    assert left == {"old3.txt", "old4.txt", f"{payload.details['correlation_id']}.txt"}


def test_where_nothing_can_be_written_the_fix_sets_a_directory_that_can(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv(INCIDENT_DIR_ENV, str(blocker / "incidents"))  # under a file: no mkdir
    payload = error_payload(_crash("boom"), where="tool queue_stats")
    assert payload.code == "INTERNAL"
    assert str(blocker / "incidents") in payload.cause and "server's log" in payload.cause
    assert payload.fix.startswith(f"export {INCIDENT_DIR_ENV}=")
    assert _run(payload.fix).returncode == 0
