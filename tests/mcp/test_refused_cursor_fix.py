"""A cursor the strict model refuses (too long to be one, not a string) is no page to go on
from: the refusal's fix leaves it out, the first page, as CURSOR_INVALID's does, and its
next_call runs."""

from __future__ import annotations

from typing import Any

import pytest

from engine import Jobs
from mcp_jobs.operations.cursors import MAX_ANY_CURSOR_BYTES
from tests.mcp.conftest import OpenMcp

# Longer than any cursor a tool hands out (a shorter one reaches the tool: CURSOR_INVALID, or
# CURSOR_WRONG_TOOL naming the tool that handed it out).
TOO_LONG = "c" * (MAX_ANY_CURSOR_BYTES + 1)


@pytest.mark.parametrize(
    ("tool", "arguments", "cursor"),
    [
        ("list_jobs", {"state": "ready", "cursor": TOO_LONG}, "cursor"),
        ("list_jobs", {"cursor": 5}, "cursor"),
        ("list_jobs", {"cursor": [TOO_LONG]}, "cursor"),
        ("describe_jobs", {"cursor": 3}, "cursor"),
        ("inspect_job", {"steps_cursor": TOO_LONG}, "steps_cursor"),
        ("inspect_job", {"events_cursor": 7}, "events_cursor"),
    ],
)
async def test_a_refused_cursor_is_left_out_of_the_fix_and_the_first_page_is_next(
    jobs: Jobs, open_mcp: OpenMcp, tool: str, arguments: dict[str, Any], cursor: str
) -> None:
    made = await jobs.enqueue("greet", {"user_id": 1})
    if tool == "inspect_job":
        arguments = {"job_id": made.id, **arguments}
    async with open_mcp() as mcp:
        refused = await mcp.fails(tool, arguments, "TOOL_ARGUMENTS_INVALID")
        first_page = {k: v for k, v in arguments.items() if k != cursor}
        assert refused.get("next_call") == {"tool": tool, "arguments": first_page}, refused["fix"]
        assert f'"{cursor}"' not in refused["fix"]
        await mcp.ok(tool, refused["next_call"]["arguments"])


async def test_a_cursor_wrapped_in_a_list_is_still_read_as_that_cursor(
    jobs: Jobs, open_mcp: OpenMcp
) -> None:
    await jobs.enqueue("greet", {"user_id": 1})
    await jobs.enqueue("greet", {"user_id": 2})
    async with open_mcp() as mcp:
        first = await mcp.ok("list_jobs", {"limit": 1})
        refused = await mcp.fails(
            "list_jobs", {"limit": 1, "cursor": [first["next_cursor"]]}, "TOOL_ARGUMENTS_INVALID"
        )
        mended = {"limit": 1, "cursor": first["next_cursor"]}
        assert refused["next_call"] == {"tool": "list_jobs", "arguments": mended}
