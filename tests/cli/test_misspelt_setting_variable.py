"""A misspelt setting variable (`MCP_JOBS_DATABSE_URL`) is refused, naming the variable meant,
with a fix that moves the value over: read as unset, every command quietly opened (and made)
the default SQLite file `./.mcp-jobs/jobs.db`, and `jobs ls` answered "no jobs"."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from mcp_jobs.config import SETTING_VARIABLES, misspelt_setting

README = Path(__file__).resolve().parents[2] / "README.md"


@pytest.mark.parametrize(
    ("name", "meant"),
    [
        ("MCP_JOBS_DATABSE_URL", "MCP_JOBS_DATABASE_URL"),
        ("MCP_JOB_DATABASE_URL", "MCP_JOBS_DATABASE_URL"),
        ("MCPJOBS_DATABASE_URL", "MCP_JOBS_DATABASE_URL"),
        ("MCP_JOBS_RETAIN_DONES", "MCP_JOBS_RETAIN_DONE"),
        ("MCP_JOBS_PRUNE_EVRY", "MCP_JOBS_PRUNE_EVERY"),
        ("MCP_JOBS_TOKENFILE", "MCP_JOBS_TOKEN_FILE"),
    ],
)
def test_a_misspelt_setting_is_refused_naming_the_one_meant(name: str, meant: str) -> None:
    error = misspelt_setting({name: "postgresql://app:secret@db/jobs", "HOME": "/root"})
    assert error is not None
    assert error.code == "INVALID_ARGUMENT" and not error.retryable
    assert name in error.cause and meant in error.cause
    assert "secret" not in error.cause and "secret" not in error.fix
    # The fix moves the value over, in the shell that set it.
    done = subprocess.run(
        ["bash", "-c", f'{error.fix}; echo "${meant}|${{{name}-unset}}"'],
        env={name: "value one", "PATH": os.environ["PATH"]},
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.strip() == "value one|unset"


@pytest.mark.parametrize(
    "environ",
    [
        {"MCP_JOBS_DATABASE_URL": "sqlite:///a.db"},
        # Both set: the right one is read; the slip changes nothing.
        {"MCP_JOBS_DATABASE_URL": "sqlite:///a.db", "MCP_JOBS_DATABSE_URL": "x"},
        # Other programs' and the test suite's own variables are none of ours to judge.
        {"MCP_JOBS_TEST_PG_DSN": "x", "MCP_JOBS_BENCH_REDIS_URL": "y", "DATABASE_URL": "z"},
    ],
)
def test_variables_that_are_no_slip_of_a_setting_pass(environ: dict[str, str]) -> None:
    assert misspelt_setting(environ) is None


def test_every_setting_variable_is_one_the_readme_documents() -> None:
    text = README.read_text()
    # The OAuth ones share a row: `MCP_JOBS_OAUTH_ISSUER`, `…_AUDIENCE`, …
    written = [(name, "…" + name.removeprefix("MCP_JOBS_OAUTH")) for name in SETTING_VARIABLES]
    assert [name for name, short in written if name not in text and short not in text] == []


@pytest.mark.parametrize("name", ["MCP_JOBS_TENANT_ID", "MCP_JOBS_TENANT", "mcp_jobs_tenant"])
def test_a_variable_meant_to_pin_a_tenant_is_refused(name: str, tmp_path: Path) -> None:
    """exploreA2: with MCP_JOBS_TENANT_ID=acme set, `jobs show` printed another tenant's error
    text and `jobs cancel` cancelled its job: no variable pins a tenant, and nothing said so."""
    env = {name: "acme", "PATH": os.environ["PATH"], "HOME": str(tmp_path)}
    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    done = subprocess.run(
        [sys.executable, "-m", "mcp_jobs.cli", "jobs", "ls", "--database-url", url],
        env=env,
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 1 and "INVALID_ARGUMENT" in out and "--tenant acme" in out, out
    fix = [line for line in out.splitlines() if line.strip().startswith("fix:")]
    assert fix == [f"  fix:   unset {name}"], out
    # A setting of ours that names a tenant is no such variable.
    assert misspelt_setting({"MCP_JOBS_OAUTH_TENANT_CLAIM": "org"}) is None
