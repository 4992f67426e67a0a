"""On a server pinned to a tenant, an argument respelt as tenant_id (`tenantId`) is moved there
as the pinned tenant, not as the value given: the next_call ran into TENANT_PINNED."""

from __future__ import annotations

from engine import Jobs
from mcp_jobs.config import Settings
from tests.mcp.conftest import OpenMcp


async def test_a_respelt_tenant_is_mended_to_the_pinned_one(jobs: Jobs, open_mcp: OpenMcp) -> None:
    await jobs.enqueue("receipt", {"order_id": 1}, tenant_id="acme")
    async with open_mcp(Settings(tenant="acme")) as mcp:
        asked = {"tenantId": "globex", "state": "ready"}
        refused = await mcp.fails("list_jobs", asked, "TOOL_ARGUMENTS_INVALID")
        mended = {"state": "ready", "tenant_id": "acme"}
        assert refused["next_call"] == {"tool": "list_jobs", "arguments": mended}
        listed = await mcp.ok("list_jobs", refused["next_call"]["arguments"])
        assert [j["tenant_id"] for j in listed["jobs"]] == ["acme"]
        written = await mcp.fails(
            "enqueue_job",
            {"name": "receipt", "input": {"order_id": 2}, "tenantId": "globex"},
            "TOOL_ARGUMENTS_INVALID",
        )
        assert '"tenant_id": "acme"' in written["fix"] and "globex" not in written["fix"]


async def test_an_unpinned_server_moves_the_respelt_tenant_as_given(
    jobs: Jobs, open_mcp: OpenMcp
) -> None:
    async with open_mcp() as mcp:
        refused = await mcp.fails("list_jobs", {"tenantId": "globex"}, "TOOL_ARGUMENTS_INVALID")
        assert refused["next_call"] == {"tool": "list_jobs", "arguments": {"tenant_id": "globex"}}
