"""prune_history and `db prune` under a bad retention variable. Through MCP the variable is the
running server's, read when it started: the fix is the server started again with it, not an
`export` the agent's shell keeps to itself. A call whose `older_than` replaces the states'
policies does not read them, so a bad one does not refuse it."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from engine import Jobs
from mcp_jobs.cli import main
from tests.cli.databases import migrated
from tests.mcp.conftest import OpenMcp
from tests.support.fix_lines import command_words

pytestmark = pytest.mark.drivers("memory", reason="the settings, not the storage")


async def test_through_mcp_the_fix_restarts_the_server_with_the_variable(
    jobs: Jobs, open_mcp: OpenMcp, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MCP_JOBS_RETAIN_DONE", "a while")
    async with open_mcp() as mcp:
        error = await mcp.fails("prune_history", {}, "RETENTION_SETTING_INVALID")
        assert "restart" in error["cause"], error
        # Past any assignment of this process's context (`SHOP_DB=…`, imported earlier).
        words = shlex.split(error["fix"])
        assert "MCP_JOBS_RETAIN_DONE=forever" in words, error  # no duration read in it
        assert command_words(error["fix"])[:2] == ["mcp-jobs", "serve"], error
        assert "export" not in error["fix"], error


async def test_older_than_prunes_without_the_policy_it_replaces(
    jobs: Jobs, open_mcp: OpenMcp, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MCP_JOBS_RETAIN_DONE", "a while")
    async with open_mcp() as mcp:
        plan = await mcp.ok("prune_history", {"older_than_seconds": 86400})
        assert plan["mode"] == "dry_run"
        # The audit retention is still used by such a call: a bad one still refuses it, unless
        # the call leaves the audit trail alone (some states, or a tenant).
        monkeypatch.setenv("MCP_JOBS_RETAIN_AUDIT", "a while")
        await mcp.fails("prune_history", {"older_than_seconds": 86400}, "RETENTION_SETTING_INVALID")
        await mcp.ok("prune_history", {"older_than_seconds": 86400, "states": ["done"]})


def test_the_cli_prunes_by_older_than_under_a_bad_retention_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MCP_JOBS_RETAIN_DONE", "a while")
    url = migrated(f"sqlite:///{tmp_path}/jobs.db")
    argv = ["db", "prune", "--database-url", url, "--dry-run", "--json"]
    assert main([*argv, "--older-than", "1d"]) == 0
    assert json.loads(capsys.readouterr().out)["mode"] == "dry_run"
    assert main(argv) == 1  # by the policy: the variable is read, and refused
    error = json.loads(capsys.readouterr().out)["error"]
    assert error["code"] == "RETENTION_SETTING_INVALID"
    assert error["fix"] == "export MCP_JOBS_RETAIN_DONE=forever"
