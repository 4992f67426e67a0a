"""A task-augmented call the tool refuses answers a JSON-RPC error whose fix is the caller's own
call mended, not the call the server made of it (a task starts the work with a zero wait), and
whose message names the tool once."""

from __future__ import annotations

from typing import Any

import pytest
from mcp.shared.exceptions import MCPError

from engine import Jobs
from tests.mcp.test_tasks import LEGACY, raw, session


async def refused(client: Any, mode: str, tool: str, arguments: dict[str, Any]) -> MCPError:
    params: dict[str, Any] = {"name": tool, "arguments": arguments}
    if mode == LEGACY:
        params["task"] = {"ttl": 60000}
    with pytest.raises(MCPError) as caught:
        await raw(client, "tools/call", params)
    return caught.value


@pytest.mark.parametrize(
    ("tool", "arguments", "injected"),
    [
        ("wait_for_job", {"job_id": 7}, None),
        ("wait_for_job", {"job_id": 7, "timeout_seconds": 5}, 5),
        ("run_backfill", {"name": "backfill_customers", "write": True, "confirm": True}, None),
    ],
)
async def test_the_fix_is_the_callers_call(
    jobs: Jobs,
    app: Any,
    mode: str,
    tool: str,
    arguments: dict[str, Any],
    injected: int | None,
) -> None:
    async with session(jobs, mode) as client:
        error = await refused(client, mode, tool, arguments)
    assert not error.message.startswith(f"{tool}: {tool}:"), error.message
    envelope = error.error.data
    assert isinstance(envelope, dict), envelope
    data = envelope["error"]
    assert data["code"] == "TOOL_ARGUMENTS_INVALID", data
    wait = "timeout_seconds" if tool == "wait_for_job" else "wait_seconds"
    shown = data["fix"].partition(" ")[2]
    if injected is None:
        assert wait not in shown, data["fix"]
    else:
        assert f'"{wait}": {injected}' in shown, data["fix"]
    call = data.get("next_call")
    if call is not None:
        assert call["arguments"].get(wait) == injected, call
