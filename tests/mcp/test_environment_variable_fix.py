"""A server whose MCP_JOBS_ENV spells a declared environment in another case (`Staging`):
no tool takes an environment, and the server read the variable when it started, so the fix
is the server started again with the variable as declared, not `pass environment="staging"`
(a Python argument) nor an `export` the agent's shell keeps to itself."""

from __future__ import annotations

import shlex

import pytest

from engine import Jobs
from engine.backfill import BackfillRegistry
from mcp_jobs.config import Settings
from tests.backfill.support import Customers
from tests.mcp.conftest import OpenMcp
from tests.support.fix_lines import command_words

pytestmark = pytest.mark.drivers("memory", reason="the settings, not the storage")


async def test_a_server_environment_in_another_case_is_mended_by_a_restart(
    jobs: Jobs, backfill_registry: BackfillRegistry, customers: Customers, open_mcp: OpenMcp
) -> None:
    customers.declare(backfill_registry, environments=["staging"])
    async with open_mcp(Settings(environment="Staging")) as mcp:
        for tool, arguments in (
            ("list_backfills", {}),
            ("run_backfill", {"name": "normalize_emails"}),
        ):
            error = await mcp.fails(tool, arguments, "INVALID_ARGUMENT")
            assert error["details"]["argument"] == "MCP_JOBS_ENV", error
            assert "restart" in error["cause"], error
            words = shlex.split(error["fix"])
            assert "MCP_JOBS_ENV=staging" in words, error
            assert command_words(error["fix"])[:2] == ["mcp-jobs", "serve"], error
            assert "export" not in words and "pass" not in words, error
