"""`python -m benchmarks.cap_fairness` at smoke sizes on SQLite, so it cannot rot: every job of
the queue run runs, and tenant small's jobs start behind tenant big's backlog. Timing is never
asserted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.cap_fairness import main

pytestmark = pytest.mark.slow


@pytest.mark.timeout(300)
def test_both_runs_finish_and_report(tmp_path: Path) -> None:
    out = tmp_path / "caps.json"
    argv = ["--backend", "sqlite", "--backlog", "60", "--tenant-body-ms", "20", "--seconds", "1"]
    assert main([*argv, "--queue-jobs", "9", "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["queue"]["ran"] == result["queue"]["jobs"] == 9
    assert result["tenant"]["small_started"] > 0
