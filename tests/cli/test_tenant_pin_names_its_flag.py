"""A CLI command pinned to a tenant by its own `--tenant` says so when it refuses another tenant
(TENANT_PINNED) or an operation over every tenant (TENANT_SCOPE_EXCEEDED): no server is
involved, and "this server is pinned" sent a user looking for one (the MCP server's refusal
still names the server: tests/mcp/test_tenant_pin_names_the_server.py)."""

from __future__ import annotations

import pytest

from tests.cli.databases import migrated
from tests.cli.support import run


def test_a_pinned_commands_refusals_name_its_tenant_flag_not_a_server(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    migrated(url)
    common = ["--tenant", "acme", "--database-url", url, "--json"]
    code, out = run(capsys, "jobs", "ls", "--tenant-id", "globex", *common)
    assert code == 1 and out["error"]["code"] == "TENANT_PINNED"
    cause = out["error"]["cause"]
    assert "--tenant" in cause and '"acme"' in cause and "server" not in cause, cause
    code, out = run(capsys, "queues", "pause", "q", *common)
    assert code == 1 and out["error"]["code"] == "TENANT_SCOPE_EXCEEDED"
    cause = out["error"]["cause"]
    assert "--tenant" in cause and '"acme"' in cause and "server" not in cause, cause
