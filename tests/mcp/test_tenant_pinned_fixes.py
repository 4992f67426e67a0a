"""TENANT_PINNED's fix is the caller's own call with only the tenant mended: its filters, name,
input and priority kept (a listing of every state, or a cancel of every live job, is never what
was asked); a read comes with it as next_call, a write is shown only."""

from __future__ import annotations

import json
from typing import Any

import pytest

from engine import Jobs
from mcp_jobs.config import Settings
from tests.mcp.conftest import OpenMcp

PINNED = Settings(tenant="acme")


def _call(fix: str) -> tuple[str, dict[str, Any]]:
    tool, _, arguments = fix.partition(" ")
    return tool, json.loads(arguments)


@pytest.mark.parametrize(
    ("tool", "arguments", "runs"),
    [
        (
            "list_jobs",
            {"tenant_id": "globex", "state": ["dead"], "name": "flaky", "limit": 5},
            True,
        ),
        (
            "enqueue_job",
            {"name": "receipt", "input": {"order_id": 6}, "tenant_id": "globex", "priority": 3},
            False,
        ),
        (
            "send_event",
            {"name": "pay.done", "key": "9", "payload": {"a": 1}, "tenant_id": "globex"},
            False,
        ),
        ("cancel_jobs", {"tenant_id": "globex", "name": "flaky"}, False),
    ],
)
async def test_the_fix_is_the_callers_call_in_the_pinned_tenant(
    jobs: Jobs, open_mcp: OpenMcp, tool: str, arguments: dict[str, Any], runs: bool
) -> None:
    async with open_mcp(PINNED) as mcp:
        error = await mcp.fails(tool, arguments, "TENANT_PINNED")
        assert _call(error["fix"]) == (tool, {**arguments, "tenant_id": "acme"})
        if runs:
            assert error["next_call"] == {
                "tool": tool,
                "arguments": {**arguments, "tenant_id": "acme"},
            }
            await mcp.ok(tool, error["next_call"]["arguments"])
        else:
            # Another tenant than the one asked for: a write so mended is shown, never run.
            assert error.get("next_call") is None
    assert (await jobs.list()).jobs == []
