"""`list_backfills` with a name nobody declared or ran and a runs_cursor: BACKFILL_UNKNOWN, whose
next_call lists the backfills, rather than CURSOR_INVALID, whose first page would only be
refused next for the name."""

from __future__ import annotations

from engine import Jobs
from tests.mcp.conftest import OpenMcp


async def test_an_unknown_backfill_is_refused_before_its_cursor(
    jobs: Jobs, open_mcp: OpenMcp
) -> None:
    async with open_mcp() as mcp:
        refused = await mcp.fails(
            "list_backfills", {"name": "nope", "runs_cursor": "x"}, "BACKFILL_UNKNOWN"
        )
        assert refused["next_call"] == {"tool": "list_backfills", "arguments": {}}
        await mcp.ok("list_backfills", refused["next_call"]["arguments"])
