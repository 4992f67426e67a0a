"""TENANT_PINNED's fix, the caller's call in the pinned tenant, leaves out what went with the
tenant asked (`mcp_jobs.tenant_bound`): a cursor goes with the filters of the call that
returned it, tenant_id among them, so the fix kept as it was ran into CURSOR_INVALID (exploreA2:
`list_jobs {"tenant_id": "acme", "cursor": <globex's>}`); a plan's confirm token likewise."""

from __future__ import annotations

import json
from typing import Any

from engine import Jobs
from mcp_jobs.config import Settings
from mcp_jobs.server import build_server
from mcp_jobs.server.mended_call import is_cursor
from mcp_jobs.tenant_bound import TENANT_BOUND
from tests.mcp.conftest import OpenMcp

PINNED = Settings(tenant="acme")


def _call(fix: str) -> tuple[str, dict[str, Any]]:
    tool, _, arguments = fix.partition(" ")
    return tool, json.loads(arguments)


async def test_another_tenants_cursor_is_left_out_and_the_fix_lists_the_first_page(
    jobs: Jobs, open_mcp: OpenMcp
) -> None:
    for order in range(1, 4):
        await jobs.enqueue("receipt", {"order_id": order}, tenant_id="globex")
    ours = await jobs.enqueue("receipt", {"order_id": 9}, tenant_id="acme")
    async with open_mcp() as mcp:
        page = await mcp.ok("list_jobs", {"tenant_id": "globex", "limit": 1})
    cursor = page["next_cursor"]
    assert cursor
    asked = {"tenant_id": "globex", "state": ["ready"], "cursor": cursor, "limit": 5}
    async with open_mcp(PINNED) as mcp:
        error = await mcp.fails("list_jobs", asked, "TENANT_PINNED")
        mended = {"tenant_id": "acme", "state": ["ready"], "limit": 5}
        assert error["next_call"] == {"tool": "list_jobs", "arguments": mended}
        assert _call(error["fix"]) == ("list_jobs", mended)
        assert "cursor" in error["cause"], error
        # Run as given: acme's first page, not CURSOR_INVALID.
        listed = await mcp.ok("list_jobs", error["next_call"]["arguments"])
        assert [j["id"] for j in listed["jobs"]] == [ours.id]


async def test_a_bulk_writes_confirm_token_is_left_out_of_its_dry_run_fix(
    jobs: Jobs, open_mcp: OpenMcp
) -> None:
    await jobs.enqueue("receipt", {"order_id": 1}, tenant_id="acme")
    asked = {"tenant_id": "globex", "name": "receipt", "write": True, "confirm": "t" * 40}
    async with open_mcp(PINNED) as mcp:
        error = await mcp.fails("cancel_jobs", asked, "TENANT_PINNED")
        assert error.get("next_call") is None  # another tenant's write: shown only
        tool, arguments = _call(error["fix"])
        assert (tool, arguments) == ("cancel_jobs", {"tenant_id": "acme", "name": "receipt"})
        planned = await mcp.ok(tool, arguments)
        assert planned["mode"] == "plan" and planned["plan"]["matched"] == 1
    assert [j.state for j in (await jobs.list()).jobs] == ["ready"]


async def test_every_tenant_taking_tools_cursor_and_token_is_tenant_bound() -> None:
    held = {
        name
        for tool in await build_server(Settings()).list_tools()
        if "tenant_id" in (tool.input_schema.get("properties") or {})
        for name in tool.input_schema["properties"]
        if is_cursor(name) or name == "confirm"
    }
    assert held == set(TENANT_BOUND)
