"""queue_stats naming more queues than one call reads: LIMIT_EXCEEDED that counts the names (it
said "queues=5000 … a whole number") with a fix that runs — the busiest queues, every name
left out — where the fix was prose ("pass queues as a whole number of queue names …")."""

from __future__ import annotations

import json

from engine import Jobs
from engine.bounds import MAX_QUEUES
from tests.mcp.conftest import OpenMcp


async def test_too_many_queue_names_are_refused_with_a_fix_that_runs(
    jobs: Jobs, open_mcp: OpenMcp
) -> None:
    await jobs.enqueue("greet", {"user_id": 1})
    names = [f"q{i}" for i in range(MAX_QUEUES + 1)]
    async with open_mcp() as mcp:
        refused = await mcp.fails("queue_stats", {"queues": names}, "LIMIT_EXCEEDED")
        assert refused["retryable"] is False
        assert refused["details"]["value"] == MAX_QUEUES + 1
        assert refused["details"]["limit"] == MAX_QUEUES
        tool, _, arguments = refused["fix"].partition(" ")
        assert refused["next_call"] == {"tool": tool, "arguments": json.loads(arguments)}
        assert len(json.dumps(refused)) < 2_000
        shown = await mcp.ok(tool, json.loads(arguments))
        assert "mail" in {q["queue"] for q in shown["queues"]}
