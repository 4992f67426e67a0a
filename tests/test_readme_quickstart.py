"""README "Quickstart (Python)": the code block runs as written, saved as a file and run by
Python in an empty directory (it was top-level `await` calling two undefined functions). It
enqueues, the worker runs the job up to its durable sleep, and a second run is deduped."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
# The variables that would point the snippet at another database or app than its own.
OURS = ("MCP_JOBS_DATABASE_URL", "MCP_JOBS_APP", "MCP_JOBS_TENANT", "MCP_JOBS_ENV")


def quickstart() -> str:
    section = README.read_text(encoding="utf-8").split("\n## Quickstart (Python)\n", 1)[1]
    section = section.split("\n## ", 1)[0]
    found = re.findall(r"```python\n(.*?)\n```", section, flags=re.DOTALL)
    assert found, "the Quickstart has no python block"
    block: str = found[0]
    return block


def _run(script: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in OURS}
    return subprocess.run(
        [sys.executable, script.name],
        cwd=script.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.timeout(300)
def test_the_readme_quickstart_runs_as_written(tmp_path: Path) -> None:
    script = tmp_path / "quickstart.py"
    script.write_text(quickstart() + "\n", encoding="utf-8")
    first = _run(script)
    assert first.returncode == 0, first.stderr
    job_id, state = first.stdout.split()[-2:]
    # The first step ran; the job sleeps durably (no worker slot held) until its cool-off ends.
    assert state == "suspended", first.stdout
    assert (tmp_path / ".mcp-jobs" / "jobs.db").is_file()
    again = _run(script)
    assert again.returncode == 0, again.stderr
    assert again.stdout.split()[-2:] == [job_id, "suspended"]  # deduped: the same live job
