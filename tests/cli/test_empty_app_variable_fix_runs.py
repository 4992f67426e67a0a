"""`MCP_JOBS_APP` set but naming no module (`MCP_JOBS_APP= mcp-jobs jobs ls`, as `export
MCP_JOBS_APP="$APP"` leaves it with APP unset) is refused as every setting set but empty is:
its fix unsets it. The fix was the command's --help, and the variable, read again, refused the
command again."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from mcp_jobs.cli import main
from tests.cli.databases import migrated

BIN = str(Path(sys.executable).parent)


@pytest.mark.parametrize("value", ["", " ", ","])
@pytest.mark.parametrize("command", [["jobs", "ls"], ["worker"], ["queues", "ls"]])
def test_an_app_variable_naming_no_module_is_fixed_by_unsetting_it(
    url: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    value: str,
    command: list[str],
) -> None:
    migrated(url)
    monkeypatch.setenv("MCP_JOBS_APP", value)
    assert main([*command, "--database-url", url]) == 1
    err = capsys.readouterr().err
    assert "error INVALID_ARGUMENT" in err and "MCP_JOBS_APP=" in err, err
    assert err.splitlines()[-1] == "  fix:   unset MCP_JOBS_APP", err


def test_the_fix_run_as_given_lets_the_command_run(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fix, then the command again, in the shell that holds the empty variable."""
    migrated(url)
    monkeypatch.setenv("MCP_JOBS_APP", "")
    assert main(["jobs", "ls", "--json", "--database-url", url]) == 1
    fix = json.loads(capsys.readouterr().out)["error"]["fix"]
    env = {"PATH": f"{BIN}:{os.environ.get('PATH', '')}", "HOME": str(tmp_path)}
    env["MCP_JOBS_APP"] = ""
    line = f"{fix} && mcp-jobs jobs ls --json --database-url {shlex.quote(url)}"
    done = subprocess.run(
        line, shell=True, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, (line, done.stderr)
    assert json.loads(done.stdout) == {"ok": True, "jobs": []}
