"""IDEMPOTENCY_KEY_MISSING: the fix is the caller's own call with a "<key>" slot to fill in, and
no next_call (run as given, it would enqueue the job under the literal key "<key>")."""

from __future__ import annotations

import json

from engine import JobRegistry, Jobs, ManualClock
from engine.backfill import BackfillRegistry
from tests.mcp.support import publish_charge, serve


async def test_the_fix_holds_a_key_slot_and_the_callers_arguments_and_runs_nothing(
    jobs: Jobs, registry: JobRegistry, mode: str, clock: ManualClock
) -> None:
    await publish_charge(jobs, clock)
    asked = {"name": "charge", "input": {"order_id": 3}, "tenant_id": "acme", "priority": 2}
    async with serve(jobs, mode, backfills=BackfillRegistry()) as mcp:
        error = await mcp.fails("enqueue_job", asked, "IDEMPOTENCY_KEY_MISSING")
    assert error.get("next_call") is None
    tool, _, arguments = error["fix"].partition(" ")
    assert (tool, json.loads(arguments)) == ("enqueue_job", {**asked, "key": "<key>"})
    assert (await jobs.list()).jobs == []
