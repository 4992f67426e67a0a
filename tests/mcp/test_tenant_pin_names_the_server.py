"""A server pinned by `serve --tenant` says the server pins the caller (a CLI command pinned by its
own --tenant says that instead: tests/cli/test_tenant_pin_names_its_flag.py)."""

from __future__ import annotations

from mcp_jobs.config import Settings
from tests.mcp.conftest import OpenMcp


async def test_a_pinned_servers_refusal_names_the_server(open_mcp: OpenMcp) -> None:
    async with open_mcp(Settings(tenant="acme")) as mcp:
        error = await mcp.fails("list_jobs", {"tenant_id": "globex"}, "TENANT_PINNED")
    assert error["cause"].startswith('this server is pinned to tenant "acme"'), error["cause"]
