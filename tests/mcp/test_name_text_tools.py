"""The MCP tools refuse a tenant, key or event name with a control character (a newline, a
terminal escape) as INVALID_ARGUMENT whose fix is the call with those characters dropped, and
that call, made as given, succeeds."""

from __future__ import annotations

import json

from engine import JobRegistry, Jobs
from tests.mcp.conftest import OpenMcp


def _call(fix: str) -> tuple[str, dict[str, object]]:
    tool, _, arguments = fix.partition(" ")
    return tool, json.loads(arguments)


async def test_enqueue_job_refuses_a_tenant_with_an_escape_and_its_fix_runs(
    jobs: Jobs, app: JobRegistry, open_mcp: OpenMcp
) -> None:
    async with open_mcp() as mcp:
        asked = {"name": "receipt", "input": {"order_id": 7}, "tenant_id": "acme\x1b[31m\n"}
        error = await mcp.fails("enqueue_job", asked, "INVALID_ARGUMENT")
        assert error["retryable"] is False
        tool, arguments = _call(error["fix"])
        assert tool == "enqueue_job" and arguments["tenant_id"] == "acme"
        made = await mcp.ok(tool, arguments)
    assert (await jobs.get(made["job_id"])).tenant_id == "acme"


async def test_send_event_refuses_a_name_or_key_with_a_newline_and_its_fix_runs(
    jobs: Jobs, app: JobRegistry, open_mcp: OpenMcp
) -> None:
    async with open_mcp() as mcp:
        for asked in (
            {"name": "paid\nFAKE LOG LINE", "key": "5"},
            {"name": "paid", "key": "5\u2028"},
        ):
            error = await mcp.fails("send_event", asked, "INVALID_ARGUMENT")
            tool, arguments = _call(error["fix"])
            assert tool == "send_event" and "\n" not in json.dumps(arguments)
            await mcp.ok(tool, arguments)
