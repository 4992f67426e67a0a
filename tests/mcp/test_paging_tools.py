"""inspect_job and jobs://runs/{id} answer a page of a job's history with its totals and
cursors; the paging arguments are strict and bounded."""

from __future__ import annotations

import json

from engine import Jobs, ManualClock, Worker
from tests.mcp.conftest import OpenMcp


async def _done_fulfil(jobs: Jobs, clock: ManualClock) -> str:
    r = await jobs.enqueue("fulfil", {"order_id": 1})
    worker = Worker(jobs)
    await worker.run_until_idle()
    clock.advance(10_000)
    await worker.run_until_idle()
    return r.id


async def test_inspect_job_pages_steps_and_events_with_cursors(
    jobs: Jobs, clock: ManualClock, open_mcp: OpenMcp
) -> None:
    job_id = await _done_fulfil(jobs, clock)
    async with open_mcp() as mcp:
        first = await mcp.ok("inspect_job", {"job_id": job_id, "steps_limit": 2})
        assert [s["name"] for s in first["steps"]] == ["settle", "ship"]
        assert first["steps_total"] == 3 and first["steps_cursor"]
        assert first["events_total"] == len(first["events"]) and "events_cursor" not in first
        older = await mcp.ok(
            "inspect_job",
            {"job_id": job_id, "steps_limit": 2, "steps_cursor": first["steps_cursor"]},
        )
        assert [s["name"] for s in older["steps"]] == ["reserve"]
        assert "steps_cursor" not in older

        for bad in ({"steps_limit": 0}, {"events_limit": 501}):
            await mcp.fails("inspect_job", {"job_id": job_id, **bad}, "INVALID_ARGUMENT")
        await mcp.fails(
            "inspect_job", {"job_id": job_id, "steps_limit": "9"}, "TOOL_ARGUMENTS_INVALID"
        )
        error = await mcp.fails(
            "inspect_job", {"job_id": job_id, "events_cursor": "x"}, "CURSOR_INVALID"
        )
        assert error["details"]["argument"] == "events_cursor"


async def test_the_run_resource_answers_the_default_page_and_totals(
    jobs: Jobs, clock: ManualClock, open_mcp: OpenMcp
) -> None:
    job_id = await _done_fulfil(jobs, clock)
    async with open_mcp() as mcp:
        result = await mcp.client.read_resource(f"jobs://runs/{job_id}")
        run = json.loads(result.contents[0].text)  # type: ignore[union-attr]
        assert [s["name"] for s in run["steps"]] == ["reserve", "settle", "ship"]
        assert run["steps_total"] == 3 and "steps_cursor" not in run
