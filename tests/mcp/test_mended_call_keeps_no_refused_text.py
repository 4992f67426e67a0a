"""A refusal's mended call never keeps another argument the engine is sure to refuse: a text
that no tool takes (`""`, or one holding a NUL) beside the argument refused first becomes a
slot (a cursor: the first page; a list's item: the list without it), so the next_call offered
runs as given and the fix shows what is still to fill in."""

from __future__ import annotations

from typing import Any

import pytest

from engine import Jobs
from tests.mcp.conftest import OpenMcp


@pytest.mark.parametrize(
    ("tool", "arguments", "code", "slot"),
    [
        # The server's cap refused first; the empty job id would be refused next.
        ("wait_for_job", {"job_id": "", "timeout_seconds": 60}, "LIMIT_EXCEEDED", "job_id"),
        ("list_jobs", {"limit": 500, "name": ""}, "LIMIT_EXCEEDED", "name"),
        ("inspect_job", {"job_id": "", "steps_limit": 900}, "INVALID_ARGUMENT", "job_id"),
        ("list_jobs", {"limit": "5", "tenant_id": ""}, "TOOL_ARGUMENTS_INVALID", "tenant_id"),
        ("list_jobs", {"limit": 0, "queue": "q\x00"}, "INVALID_ARGUMENT", "queue"),
    ],
)
async def test_a_text_no_tool_takes_is_a_slot_and_no_next_call_is_offered(
    open_mcp: OpenMcp, tool: str, arguments: dict[str, Any], code: str, slot: str
) -> None:
    async with open_mcp() as mcp:
        refused = await mcp.fails(tool, arguments, code)
        assert refused.get("next_call") is None, refused["next_call"]
        assert f'"{slot}": "<{slot}>"' in refused["fix"], refused["fix"]


async def test_an_empty_cursor_beside_another_refusal_is_the_first_page(
    open_mcp: OpenMcp,
) -> None:
    async with open_mcp() as mcp:
        refused = await mcp.fails("list_jobs", {"limit": 500, "cursor": ""}, "LIMIT_EXCEEDED")
        assert refused["next_call"] == {"tool": "list_jobs", "arguments": {"limit": 200}}
        await mcp.ok("list_jobs", refused["next_call"]["arguments"])


async def test_an_empty_item_of_a_list_is_left_out_and_the_call_runs(
    jobs: Jobs, open_mcp: OpenMcp
) -> None:
    await jobs.enqueue("greet", {"user_id": 1})
    async with open_mcp() as mcp:
        queue = (await mcp.ok("list_jobs", {}))["jobs"][0]["queue"]
        refused = await mcp.fails(
            "queue_stats", {"queues": [queue, ""], "limit": 500}, "LIMIT_EXCEEDED"
        )
        mended = {"queues": [queue], "limit": 200}
        assert refused["next_call"] == {"tool": "queue_stats", "arguments": mended}
        await mcp.ok("queue_stats", mended)


async def test_an_empty_confirm_is_no_token_and_stays_as_given(open_mcp: OpenMcp) -> None:
    # `confirm: ""` is taken as no token (the dry run answers one): nothing to mend there.
    async with open_mcp() as mcp:
        refused = await mcp.fails(
            "prune_history", {"older_than_seconds": "7d", "confirm": ""}, "TOOL_ARGUMENTS_INVALID"
        )
        assert refused["next_call"] == {
            "tool": "prune_history",
            "arguments": {"older_than_seconds": 604800, "confirm": ""},
        }
        await mcp.ok("prune_history", refused["next_call"]["arguments"])
