"""A paged call refused for its page size and carrying a cursor that does not go with it is
refused for the cursor too, in one answer: its next_call is the first page at a size the tool
takes, and following it answers a page rather than the next refusal."""

from __future__ import annotations

from typing import Any

import pytest

from engine import Jobs
from engine.backfill import BackfillRegistry
from tests.backfill.support import Customers
from tests.mcp.conftest import OpenMcp
from tests.mcp.support import Caller


async def _followed(mcp: Caller, tool: str, arguments: dict[str, Any], cursor: str) -> Any:
    """The refusal of `arguments` (a bad page size, a bad `cursor`), whose next_call runs."""
    answer = await mcp.call(tool, arguments)
    assert answer.is_error and answer.code == "CURSOR_INVALID", answer.data
    error = answer.data["error"]
    assert error["details"]["argument"] == cursor, error
    call = error["next_call"]
    assert call is not None and call["tool"] == tool and cursor not in call["arguments"], error
    await mcp.ok(tool, call["arguments"])
    return error


@pytest.mark.parametrize("limit", [0, 5000])
async def test_list_jobs_bad_limit_and_foreign_cursor_is_one_refusal(
    jobs: Jobs, open_mcp: OpenMcp, limit: int
) -> None:
    for n in (1, 2, 3):
        await jobs.enqueue("greet", {"user_id": n})
    async with open_mcp() as mcp:
        # A cursor handed out for another state's list, then one that is no cursor at all.
        other = (await mcp.ok("list_jobs", {"state": "ready", "limit": 1}))["next_cursor"]
        for cursor in (other, "garbage"):
            asked = {"state": "dead", "limit": limit, "cursor": cursor}
            error = await _followed(mcp, "list_jobs", asked, "cursor")
            assert error["next_call"]["arguments"] == {
                "state": "dead",
                "limit": 1 if limit < 1 else 200,
            }
            # The cause says both what is wrong with the cursor and with the limit.
            assert "cursor" in error["cause"] and "limit" in error["cause"], error


async def test_list_jobs_bad_limit_and_its_own_cursor_is_refused_for_the_limit(
    jobs: Jobs, open_mcp: OpenMcp
) -> None:
    for n in (1, 2, 3):
        await jobs.enqueue("greet", {"user_id": n})
    async with open_mcp() as mcp:
        cursor = (await mcp.ok("list_jobs", {"state": "ready", "limit": 1}))["next_cursor"]
        error = await mcp.fails(
            "list_jobs", {"state": "ready", "limit": 0, "cursor": cursor}, "INVALID_ARGUMENT"
        )
        assert error["next_call"]["arguments"] == {"state": "ready", "limit": 1, "cursor": cursor}
        await mcp.ok("list_jobs", error["next_call"]["arguments"])


async def test_inspect_job_bad_steps_limit_and_bad_cursor_is_one_refusal(
    jobs: Jobs, open_mcp: OpenMcp
) -> None:
    job = await jobs.enqueue("greet", {"user_id": 1})
    async with open_mcp() as mcp:
        for asked in (
            {"steps_limit": 0, "steps_cursor": "x"},
            {"events_limit": 501, "events_cursor": "x"},
            {"steps_limit": 0, "events_cursor": "x"},
        ):
            cursor = "steps_cursor" if "steps_cursor" in asked else "events_cursor"
            await _followed(mcp, "inspect_job", {"job_id": job.id, **asked}, cursor)


async def test_list_backfills_bad_runs_limit_and_bad_cursor_is_one_refusal(
    backfill_registry: BackfillRegistry, customers: Customers, open_mcp: OpenMcp
) -> None:
    customers.declare(backfill_registry, batch_size=10)
    async with open_mcp() as mcp:
        asked = {"name": "normalize_emails", "runs_limit": 0, "runs_cursor": "x"}
        await _followed(mcp, "list_backfills", asked, "runs_cursor")
