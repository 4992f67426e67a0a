"""`mcp-jobs serve` whose URL names a database the server does not have: it serves, its tools
answer DATABASE_URL_INVALID (not retryable) with the `database_report` that says what to change,
and once the database exists the schema is migrated and the tools act on it. Before, the server
stopped at its start: an MCP client saw a process that died, and the agent learned nothing."""

from __future__ import annotations

import os
import secrets
import sys
from pathlib import Path

import anyio
import asyncpg
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from engine import connect
from engine.errors import JobsError
from mcp_jobs.cli.database_wait import migrated_or_retrying
from tests.mcp.support import Caller
from tests.support.postgres import base_dsn, with_database


def _missing_database() -> tuple[str, str]:
    name = f"mcp_jobs_test_{secrets.token_hex(6)}"
    return name, with_database(base_dsn(), name)


@pytest.mark.slow
async def test_the_server_answers_the_refusal_and_its_report_says_what_to_change(
    tmp_path: Path,
) -> None:
    _, url = _missing_database()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_JOBS_DATABASE")}
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "mcp_jobs.cli", "serve", "--database-url", url],
        env=env,
        cwd=str(tmp_path),
    )
    with anyio.fail_after(45):
        async with Client(stdio_client(params)) as client:
            mcp = Caller(client)
            await mcp.load()
            refused = await mcp.fails("queue_stats", {}, "DATABASE_URL_INVALID")
            report = await mcp.ok("database_report")
    assert refused["retryable"] is False and "does not exist" in refused["cause"]
    assert refused["next_call"] == {"tool": "database_report", "arguments": {}}
    assert report["reachable"] is False
    assert "answered and refused the session" in report["lines"][0]
    assert "create the database" in report["lines"][1]


async def test_once_the_database_exists_the_schema_is_migrated_and_the_tools_act() -> None:
    name, url = _missing_database()
    jobs = await connect(url, migrate=False)
    migrate = jobs.driver.migrate
    migrated = anyio.Event()

    async def noted() -> None:
        await migrate()
        migrated.set()

    jobs.driver.migrate = noted  # type: ignore[method-assign]
    admin = await asyncpg.connect(base_dsn())
    try:
        async with migrated_or_retrying(jobs, first_wait_s=0.01, longest_wait_s=0.05):
            with pytest.raises(JobsError) as refused:
                await jobs.stats()
            assert refused.value.code == "DATABASE_URL_INVALID"
            await admin.execute(f'CREATE DATABASE "{name}"')
            with anyio.fail_after(30):
                await migrated.wait()
            assert await jobs.stats() == []
    finally:
        await jobs.close()
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()
