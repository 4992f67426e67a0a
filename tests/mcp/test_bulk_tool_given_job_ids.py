"""An agent that names jobs by id to a bulk tool (`cancel_jobs {"job_ids": [...]}`, `retry_jobs
{"job_id": ...}`) is refused for the unknown argument. Its fix was the bulk tool with the ids
dropped: `cancel_jobs {}`, whose plan selects every live job and whose confirm `next_call`
cancels them all. The fix is the one-job tool with the id given, which touches only that job."""

from __future__ import annotations

import json
from typing import Any

import pytest

from engine import Jobs
from tests.mcp.conftest import OpenMcp
from tests.mcp.support import stored_rows


def _call(fix: str) -> tuple[str, dict[str, Any]]:
    tool, arguments = fix.split(" ", 1)
    return tool, json.loads(arguments)


@pytest.mark.parametrize(
    ("argument", "shape"),
    [("job_ids", "list"), ("ids", "list"), ("job_id", "text"), ("jobIds", "padded")],
)
async def test_a_cancel_by_ids_sent_to_cancel_jobs_is_mended_to_cancel_job(
    jobs: Jobs, open_mcp: OpenMcp, argument: str, shape: str
) -> None:
    meant = await jobs.enqueue("greet", {"user_id": 1})
    other = await jobs.enqueue("greet", {"user_id": 2})
    given: Any = {"list": [meant.id], "text": meant.id, "padded": [f" {meant.id}\n"]}[shape]
    async with open_mcp() as mcp:
        before = await stored_rows(jobs, "jobs")
        refused = await mcp.fails(
            "cancel_jobs", {argument: given, "write": True}, "TOOL_ARGUMENTS_INVALID"
        )
        assert refused["retryable"] is False
        assert await stored_rows(jobs, "jobs") == before
        assert _call(refused["fix"]) == ("cancel_job", {"job_id": meant.id})
        assert refused.get("next_call") is None  # a write: shown, not run
        tool, arguments = _call(refused["fix"])
        await mcp.ok(tool, arguments)
    assert (await jobs.get(meant.id)).state == "cancelled"
    assert (await jobs.get(other.id)).state == "ready"


async def test_a_retry_by_id_sent_to_retry_jobs_is_mended_to_retry_job(
    jobs: Jobs, open_mcp: OpenMcp
) -> None:
    job = await jobs.enqueue("greet", {"user_id": 3})
    async with open_mcp() as mcp:
        refused = await mcp.fails("retry_jobs", {"job_id": job.id}, "TOOL_ARGUMENTS_INVALID")
        assert _call(refused["fix"]) == ("retry_job", {"job_id": job.id})


async def test_several_ids_name_each_one_job_call(jobs: Jobs, open_mcp: OpenMcp) -> None:
    one = await jobs.enqueue("greet", {"user_id": 4})
    two = await jobs.enqueue("greet", {"user_id": 5})
    async with open_mcp() as mcp:
        refused = await mcp.fails(
            "cancel_jobs", {"job_ids": [one.id, two.id]}, "TOOL_ARGUMENTS_INVALID"
        )
        assert _call(refused["fix"]) == ("cancel_job", {"job_id": one.id})
        assert two.id in refused["cause"]


async def test_an_unknown_argument_holding_no_id_keeps_the_bulk_fix(
    jobs: Jobs, open_mcp: OpenMcp
) -> None:
    async with open_mcp() as mcp:
        refused = await mcp.fails(
            "cancel_jobs", {"state": "ready", "reason": "x"}, "TOOL_ARGUMENTS_INVALID"
        )
        assert refused["fix"].startswith("cancel_jobs ")
