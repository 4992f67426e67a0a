"""enqueue_job's idempotency key sent under another name (`idempotency_key`) is moved to `key`
in the fix only as a value the call can take: for a job this server imported, the key it
computes from the input (or none, when the input gives none); for a job known only by its
published descriptor, the caller's own, which is what such a job takes."""

from __future__ import annotations

import json
from typing import Any

from engine import JobRegistry, Jobs, ManualClock
from engine.backfill import BackfillRegistry
from mcp_jobs.errors import example_call
from tests.mcp.conftest import OpenMcp
from tests.mcp.support import Caller, publish_charge, serve


async def _fixed(mcp: Caller, given: dict[str, Any]) -> dict[str, Any]:
    """The call the fix of `given`'s refusal names (a write moved by a guess: no next_call)."""
    error = await mcp.fails("enqueue_job", given, "TOOL_ARGUMENTS_INVALID")
    assert "next_call" not in error, error
    tool, arguments = error["fix"].split(" ", 1)
    assert tool == "enqueue_job"
    fixed: dict[str, Any] = json.loads(arguments)
    assert error["fix"] == f"enqueue_job {example_call(fixed)}"
    return {"fixed": fixed, "error": error}


async def test_a_moved_key_of_an_imported_job_is_the_key_it_computes(
    jobs: Jobs, open_mcp: OpenMcp
) -> None:
    async with open_mcp() as mcp:
        for moved in ("a", "greet:2"):
            given = {"name": "greet", "input": {"user_id": 2}, "idempotency_key": moved}
            found = await _fixed(mcp, given)
            assert found["fixed"] == {"name": "greet", "input": {"user_id": 2}, "key": "greet:2"}
            (entry,) = found["error"]["details"]["errors"]
            assert entry["meant"] == "key" and "greet:2" in entry["msg"], entry
        assert (await jobs.list()).jobs == []  # nothing written by a refused call
        # The fix runs as given.
        first = await mcp.ok("enqueue_job", found["fixed"])
        assert (await jobs.get(first["job_id"])).idempotency_key == "greet:2"

        # An input the job cannot take: the mended call would be refused next for it, so the
        # fix and next_call are the job's description, and the cause says both (exploreB2).
        given = {"name": "greet", "input": {"user_id": 0}, "idempotency_key": "a"}
        error = await mcp.fails("enqueue_job", given, "TOOL_ARGUMENTS_INVALID")
        assert error["next_call"] == {"tool": "describe_jobs", "arguments": {"name": "greet"}}
        assert "idempotency_key" in error["cause"] and "user_id" in error["cause"], error


async def test_a_moved_key_of_a_published_job_is_the_callers(
    jobs: Jobs, registry: JobRegistry, mode: str, clock: ManualClock
) -> None:
    await publish_charge(jobs, clock)
    async with serve(jobs, mode, backfills=BackfillRegistry()) as mcp:
        given = {"name": "charge", "input": {"order_id": 3}, "idempotency_key": "charge:3"}
        found = await _fixed(mcp, given)
        assert found["fixed"] == {"name": "charge", "input": {"order_id": 3}, "key": "charge:3"}
        done = await mcp.ok("enqueue_job", found["fixed"])
        assert (await jobs.get(done["job_id"])).idempotency_key == "charge:3"
