"""A write refused for a name the engine mends into another name ("pay\\nsettled" into
"paysettled", "-orders" into "orders") shows the mended call in its fix but offers no
next_call: following it sent an event nothing waits for, or paused a live queue (exploreW). A
read so mended still runs as given."""

from __future__ import annotations

from engine import Jobs
from tests.mcp.conftest import OpenMcp

INVALID = "INVALID_ARGUMENT"


async def test_a_renamed_write_is_shown_not_offered(jobs: Jobs, open_mcp: OpenMcp) -> None:
    async with open_mcp() as mcp:
        sent = await mcp.fails("send_event", {"name": "pay\nsettled", "key": "61"}, INVALID)
        assert sent.get("next_call") is None, sent
        assert "paysettled" in sent["fix"], sent
        paused = await mcp.fails("pause_queue", {"queue": "-orders"}, INVALID)
        assert paused.get("next_call") is None, paused
        assert '"orders"' in paused["fix"], paused
    assert await jobs.pauses() == []
