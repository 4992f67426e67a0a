"""A cursor one tool handed out, sent to another (list_jobs' to describe_jobs, a steps cursor
as events_cursor): CURSOR_WRONG_TOOL naming the tool and argument it belongs to, whose fix (the
call without it) runs; never a page of the wrong list nor a generic CURSOR_INVALID."""

from __future__ import annotations

import json
from typing import Any

import pytest

from engine import Jobs
from engine.backfill import BackfillRegistry
from engine.paging import (
    cursor_kind,
    event_cursor,
    list_cursor,
    names_cursor,
    runs_cursor,
    step_cursor,
)
from schemas.jobs import JobFilter
from tests.backfill.support import Customers
from tests.mcp.conftest import OpenMcp
from tests.mcp.support import Caller

CODE = "CURSOR_WRONG_TOOL"


async def _refused_for(mcp: Caller, tool: str, arguments: dict[str, Any], owner: str) -> None:
    error = await mcp.fails(tool, arguments, CODE)
    assert error["details"]["tool"] == owner.split(".")[0], error
    assert owner.split(".")[0] in error["cause"]
    called, _, rest = error["fix"].partition(" ")
    assert error["next_call"] == {"tool": called, "arguments": json.loads(rest)}
    assert called == tool and not any("cursor" in k for k in json.loads(rest))
    assert not (await mcp.call(called, json.loads(rest))).is_error


@pytest.mark.drivers("memory", "sqlite", reason="cursors are checked before any read")
async def test_a_cursor_sent_to_another_tool_names_the_tool_it_belongs_to(
    jobs: Jobs, open_mcp: OpenMcp
) -> None:
    async with open_mcp() as mcp:
        for user_id in (1, 2, 3):
            await mcp.ok("enqueue_job", {"name": "greet", "input": {"user_id": user_id}})
        listed = await mcp.ok("list_jobs", {"limit": 1})
        described = await mcp.ok("describe_jobs", {"limit": 1})
        job_id = listed["jobs"][0]["id"]
        jobs_cursor, names_cursor = listed["next_cursor"], described["next_cursor"]
        await _refused_for(mcp, "describe_jobs", {"cursor": jobs_cursor}, "list_jobs")
        await _refused_for(mcp, "list_jobs", {"cursor": names_cursor}, "describe_jobs")
        inspect = {"job_id": job_id, "events_cursor": step_cursor(job_id, 1, 2)}
        await _refused_for(mcp, "inspect_job", inspect, "inspect_job.steps_cursor")
        await _refused_for(mcp, "list_jobs", {"cursor": event_cursor(job_id, 7)}, "inspect_job")
        # A filtered list's cursor is list_jobs' too, whatever its filters.
        filtered = list_cursor(job_id, JobFilter(name="greet", limit=1))
        await _refused_for(mcp, "describe_jobs", {"cursor": filtered}, "list_jobs")


def test_cursor_kind_tells_each_kind_and_nothing_else() -> None:
    job_id = "0" * 32
    assert cursor_kind(list_cursor(job_id, JobFilter(limit=1))) == "jobs"
    assert cursor_kind(list_cursor(job_id, JobFilter(queue="q", limit=1))) == "jobs"
    # A trace's cursors are bound to their job, a backfill's runs to its name, and still tell
    # their kind without them.
    assert cursor_kind(step_cursor(job_id, 1, 2)) == "steps"
    assert cursor_kind(event_cursor(job_id, 3)) == "events"
    assert cursor_kind(runs_cursor(1, "f" * 32, "nightly")) == "runs"
    assert cursor_kind(names_cursor("greet")) == cursor_kind(names_cursor(job_id)) == "names"
    # An edited cursor is no other kind by its length alone (a name's bytes are no position).
    edited = names_cursor("flaky") + "AAAA"
    for text in ("greet", "", "c1.", "c1.AAAA", edited, None, 5):
        assert cursor_kind(text) is None


@pytest.mark.drivers("memory", "sqlite", reason="cursors are checked before any read")
async def test_a_list_cursor_as_a_backfills_runs_cursor_names_list_jobs(
    jobs: Jobs, backfill_registry: BackfillRegistry, customers: Customers, open_mcp: OpenMcp
) -> None:
    customers.declare(backfill_registry, batch_size=10)
    async with open_mcp() as mcp:
        cursor = list_cursor("0" * 32, JobFilter(limit=1))
        asked = {"name": "normalize_emails", "runs_cursor": cursor}
        await _refused_for(mcp, "list_backfills", asked, "list_jobs")
