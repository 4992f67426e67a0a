"""README "Quickstart (Python)": the code block runs as written, saved as a file and run by
Python in an empty directory (it was top-level `await` calling two undefined functions). It
enqueues, the worker runs the job up to its durable sleep, and a second run is deduped."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.readme import own_environment, python_block


def _run(script: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, script.name],
        cwd=script.parent,
        env=own_environment(),
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.timeout(300)
def test_the_readme_quickstart_runs_as_written(tmp_path: Path) -> None:
    script = tmp_path / "quickstart.py"
    script.write_text(python_block("## Quickstart (Python)") + "\n", encoding="utf-8")
    first = _run(script)
    assert first.returncode == 0, first.stderr
    job_id, state = first.stdout.split()[-2:]
    # The first step ran; the job sleeps durably (no worker slot held) until its cool-off ends.
    assert state == "suspended", first.stdout
    assert (tmp_path / ".mcp-jobs" / "jobs.db").is_file()
    again = _run(script)
    assert again.returncode == 0, again.stderr
    assert again.stdout.split()[-2:] == [job_id, "suspended"]  # deduped: the same live job
