"""A cursor goes with what it pages, through the tools: inspect_job's steps and events cursors
with the job, list_backfills' runs cursor with the backfill (each, sent with another, answered
that one's history from this one's position: `steps: []` beside `steps_total: 3`), and
describe_jobs' cursor is a checked token like theirs (any text was taken as a name to page on
after). Each is CURSOR_INVALID whose fix, the first page of the call as asked, runs."""

from __future__ import annotations

import json
from typing import Any

import pytest

from engine import Jobs, ManualClock
from engine.testing.kit.test_backfill_ledger import _ledger
from engine.testing.kit.test_cursors import _second_job
from engine.testing.kit.test_paging import _job_with_history
from tests.mcp.conftest import OpenMcp
from tests.mcp.support import Caller

pytestmark = pytest.mark.drivers("memory", "sqlite", reason="cursors are checked before any read")

GARBAGE = "garbage!!"


async def _refused_to_first_page(
    mcp: Caller, tool: str, arguments: dict[str, Any], first: dict[str, Any]
) -> Any:
    """The answer of `tool`'s first page `first`, after `arguments` (a cursor that does not go
    with them) is refused CURSOR_INVALID with that page as its fix."""
    error = await mcp.fails(tool, arguments, "CURSOR_INVALID")
    assert error["next_call"] == {"tool": tool, "arguments": first}, error
    called, _, rest = error["fix"].partition(" ")
    assert (called, json.loads(rest)) == (tool, first), error["fix"]
    return await mcp.ok(tool, first)


async def test_inspect_job_refuses_a_cursor_of_another_jobs_trace(
    jobs: Jobs, clock: ManualClock, open_mcp: OpenMcp
) -> None:
    a = await _job_with_history(jobs, clock, steps=5, events=5)
    b = await _second_job(jobs, clock, steps=3, events=3)
    async with open_mcp() as mcp:
        page = {"steps_limit": 2, "events_limit": 2}
        first = await mcp.ok("inspect_job", {"job_id": a, **page})
        for argument in ("steps_cursor", "events_cursor"):
            cursor = first[argument]
            asked = {"job_id": b, argument: cursor}
            shown = await _refused_to_first_page(mcp, "inspect_job", asked, {"job_id": b})
            assert len(shown["steps"]) == shown["steps_total"] == 3
            assert len(shown["events"]) == shown["events_total"] == 3
            on_a = await mcp.ok("inspect_job", {"job_id": a, **page, argument: cursor})
            assert (len(on_a["steps"]), len(on_a["events"])) == (2, 2)


async def test_describe_jobs_refuses_a_cursor_it_did_not_hand_out(
    jobs: Jobs, open_mcp: OpenMcp
) -> None:
    async with open_mcp() as mcp:
        everything = await mcp.ok("describe_jobs", {})
        names = [d["name"] for d in everything["jobs"]]
        assert len(names) >= 3 and "next_cursor" not in everything
        walked: list[str] = []
        cursor = None
        while True:
            page = await mcp.ok(
                "describe_jobs", {"limit": 1} if cursor is None else {"limit": 1, "cursor": cursor}
            )
            walked += [d["name"] for d in page["jobs"]]
            cursor = page.get("next_cursor")
            if cursor is None:
                break
            assert cursor not in names and len(walked) <= len(names)
        assert walked == names
        real = (await mcp.ok("describe_jobs", {"limit": 1}))["next_cursor"]
        # A bare name is what describe_jobs handed out before: no longer a cursor.
        for bad in (GARBAGE, names[0], real[:-2], real + "AAAA"):
            await _refused_to_first_page(mcp, "describe_jobs", {"cursor": bad}, {})
            asked = {"cursor": bad, "limit": 2}
            await _refused_to_first_page(mcp, "describe_jobs", asked, {"limit": 2})
        asked = {"name": "greet", "cursor": GARBAGE}
        await _refused_to_first_page(mcp, "describe_jobs", asked, {"name": "greet"})
        # A page over the cap beside it: the cursor is refused too, and the fix is the first
        # page at the cap (not the same cursor, to be refused next).
        error = await mcp.fails(
            "describe_jobs", {"cursor": GARBAGE, "limit": 10_000}, "CURSOR_INVALID"
        )
        assert error["next_call"]["tool"] == "describe_jobs", error
        assert "cursor" not in error["next_call"]["arguments"], error
        await mcp.ok("describe_jobs", error["next_call"]["arguments"])


async def test_list_backfills_refuses_a_runs_cursor_of_another_backfill(
    jobs: Jobs, open_mcp: OpenMcp
) -> None:
    await _ledger(jobs)  # "fill" and "other", in development (this server's environment)
    async with open_mcp() as mcp:
        first = await mcp.ok("list_backfills", {"name": "fill", "runs_limit": 10})
        cursor = first["runs_cursor"]
        assert cursor and len(first["runs"]) == 10
        asked = {"name": "other", "runs_cursor": cursor}
        shown = await _refused_to_first_page(mcp, "list_backfills", asked, {"name": "other"})
        assert len(shown["runs"]) == 5
        following = {"name": "fill", "runs_limit": 10, "runs_cursor": cursor}
        assert len((await mcp.ok("list_backfills", following))["runs"]) == 10
