"""`jobs enqueue --input '{"free": NaN}'`: NaN, Infinity or a number past a float's range in the
input is JOB_INPUT_INVALID naming the field ("finite number"), as the Python API and MCP's
enqueue_job say it, whether the field bounds the number or not. It was INVALID_ARGUMENT "NaN is
no JSON value", its fix the command's --help."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

APP = """
from pydantic import BaseModel, Field
from engine import JobContext, job

class Sample(BaseModel):
    free: float = 0
    capped: float = Field(default=0, le=600)

@job(idempotency_key=lambda i: str(i.free))
async def sample(input: Sample, ctx: JobContext) -> None:
    return None
"""


def _cli(home: Path, url: str, *words: str) -> subprocess.CompletedProcess[str]:
    """A process of its own: the app's job is declared in its default registry only."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_JOBS_")}
    env["PYTHONPATH"] = str(home)
    return subprocess.run(
        [sys.executable, "-m", "mcp_jobs.cli", *words, "--database-url", url],
        cwd=home,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )


@pytest.mark.slow
def test_a_non_finite_number_in_the_input_is_job_input_invalid_at_its_field(
    tmp_path: Path,
) -> None:
    module = f"floats_app_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{module}.py").write_text(APP)
    url = f"sqlite:///{tmp_path}/jobs.db"
    assert _cli(tmp_path, url, "db", "migrate").returncode == 0
    for text, field in (
        ('{"free": NaN}', "free"),
        ('{"capped": NaN}', "capped"),
        ('{"free": -Infinity}', "free"),
        ('{"free": 1e999}', "free"),
    ):
        done = _enqueue(tmp_path, url, module, text)
        assert done.returncode == 1, done.stderr
        error = json.loads(done.stdout)["error"]
        assert error["code"] == "JOB_INPUT_INVALID" and not error["retryable"], error
        assert f"at {field}: Input should be a finite number" in error["cause"], error
    done = _enqueue(tmp_path, url, module, '{"free": 1.5}')
    assert done.returncode == 0 and json.loads(done.stdout)["state"] == "ready", done.stderr


def _enqueue(home: Path, url: str, module: str, text: str) -> subprocess.CompletedProcess[str]:
    argv = ("jobs", "enqueue", "sample", "--input", text, "--app", module, "--json")
    return _cli(home, url, *argv)
