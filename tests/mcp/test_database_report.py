"""`database_report`: `mcp-jobs db report` as a tool, for an agent with no shell or on another
machine. A failure whose fix is that command reaches an MCP client as the tool's call."""

from __future__ import annotations

import socket

import pytest

from engine import Jobs, connect
from engine.drivers.urls import report_fix
from mcp_jobs.config import Settings
from mcp_jobs.fix_context import FixContext
from schemas.errors import ErrorPayload, NextCall
from tests.mcp.conftest import OpenMcp
from tests.mcp.support import serve
from tests.support.fix_lines import run_fix


async def test_the_report_reads_the_server_s_own_database(jobs: Jobs, open_mcp: OpenMcp) -> None:
    async with open_mcp() as mcp:
        report = await mcp.ok("database_report")
    assert report["driver"] == jobs.driver.kind and report["reachable"] is True
    assert report["lines"]


async def test_a_server_pinned_to_a_tenant_refuses_it_with_the_operator_s_command(
    database_url: str, open_mcp: OpenMcp
) -> None:
    async with open_mcp(Settings(database_url=database_url, tenant="acme")) as mcp:
        refused = await mcp.fails("database_report", {}, "TENANT_SCOPE_EXCEEDED")
    # The report shows every session and database of the server: an operator's command.
    assert refused["details"]["tenant_id"] == "acme" and refused.get("next_call") is None
    assert "mcp-jobs db report --json --database-url " in refused["fix"]
    assert refused["cause"].endswith(
        "the fix is an operator's, over every tenant: give it to the user"
    )
    if not database_url.startswith("memory://"):  # a memory store lives in its process only
        assert '"reachable": true' in run_fix(refused["fix"])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


async def test_a_database_that_does_not_answer_points_the_agent_at_the_report() -> None:
    port = _free_port()
    url = f"postgresql://nobody@127.0.0.1:{port}/none"
    jobs = await connect(url, migrate=False, retry_deadline_ms=0)
    try:
        async with serve(jobs, "auto", Settings(database_url=url)) as mcp:
            error = await mcp.fails("list_jobs", {}, "DRIVER_UNAVAILABLE")
            assert error["retryable"] is True
            assert error["fix"] == "database_report {}"
            assert error["next_call"] == {"tool": "database_report", "arguments": {}}
            report = await mcp.ok(error["next_call"]["tool"], error["next_call"]["arguments"])
    finally:
        await jobs.close()
    assert report["reachable"] is False
    assert report["lines"][0].startswith(f"server: no answer from 127.0.0.1:{port} ")


@pytest.mark.parametrize("tenant", [None, "acme"])
def test_only_an_unpinned_mcp_client_is_given_the_tool(tenant: str | None) -> None:
    fix = report_fix("postgresql://app@db.example/jobs")
    payload = ErrorPayload(code="DRIVER_UNAVAILABLE", title="t", cause="c", fix=fix, retryable=True)
    settings = Settings(database_url="postgresql://app@db.example/jobs", tenant=tenant)
    mcp = FixContext.of(settings, face="mcp").qualify_all(payload)
    cli = FixContext.of(settings, face="cli").qualify_all(payload)
    # (An app's declared environment may be written in front: `SHOP_DB=… mcp-jobs …`.)
    assert cli.fix.endswith(fix) and cli.next_call is None
    if tenant is None:
        call = NextCall(tool="database_report", arguments={})
        assert (mcp.fix, mcp.next_call) == ("database_report {}", call)
    else:
        assert mcp.fix.endswith(fix) and mcp.next_call is None
