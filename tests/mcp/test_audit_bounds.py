"""A refused call with a huge argument costs a bounded audit line and a bounded answer."""

from __future__ import annotations

import json
from typing import Any

from engine import Jobs
from mcp_jobs.config import Settings
from mcp_jobs.operations.envelope import PAYLOAD_LIMIT
from mcp_jobs.server.audit import AUDIT_EVENT
from tests.mcp.conftest import OpenMcp
from tests.mcp.support import Caller, stored_rows

MB = 1_000_000
# An audit event holds its tool, outcome and a few arguments, each cut to AUDIT_VALUE_CHARS.
EVENT_BYTES = 2_000


def _size(value: object) -> int:
    return len(json.dumps(value, default=str, ensure_ascii=False).encode())


async def test_a_refused_call_with_huge_arguments_audits_a_bounded_summary(
    jobs: Jobs, open_mcp: OpenMcp
) -> None:
    calls = [
        ("cancel_job", {"job_id": "j" * MB}),
        ("retry_job", {"job_id": "r" * MB, "include_cancelled": True}),
        ("enqueue_job", {"name": "n" * MB, "input": {}, "tenant_id": "t" * MB}),
        ("cancel_job", {"job_id": "nul\x00id"}),
        ("enqueue_job", {"name": "greet", "input": {"user_id": 0}, "tenant_id": "a\x00b"}),
    ]
    before = len(await stored_rows(jobs, "events"))
    async with open_mcp() as mcp:
        for tool, arguments in calls:
            answer = await mcp.call(tool, arguments)
            assert answer.is_error
            assert _size(answer.data) <= PAYLOAD_LIMIT + 100, tool
    added = (await stored_rows(jobs, "events"))[before:]
    assert len(added) == len(calls)
    for row in added:
        assert _size(row) <= EVENT_BYTES, str(row)[:300]
    audits = [e for e in added if AUDIT_EVENT in e]
    assert len(audits) == len(calls)
    # The cut value says it was cut and how long it was.
    assert f"({MB} characters in all)" in str(audits[0])
    assert "j" * 100 in str(audits[0])


async def _refused(mcp: Caller, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    answer = await mcp.call(tool, arguments)
    assert answer.is_error
    error: dict[str, Any] = answer.data["error"]
    assert _size(error) <= PAYLOAD_LIMIT, (tool, _size(error))
    return error


async def test_an_error_echoes_a_bounded_slice_of_the_input(open_mcp: OpenMcp) -> None:
    async with open_mcp() as mcp:
        await _refused(mcp, "enqueue_job", {"name": "x" * (5 * MB), "input": {}})
        # Ten thousand wrong items: the error lists some of them, not all.
        wrong = await _refused(mcp, "queue_stats", {"queues": list(range(10_000))})
        assert wrong["code"] == "TOOL_ARGUMENTS_INVALID"
        extra = await _refused(mcp, "describe_jobs", {"k" * MB: 1})
        assert extra["code"] == "TOOL_ARGUMENTS_INVALID"
    async with open_mcp(Settings(tenant="acme")) as mcp:
        pinned = await _refused(mcp, "list_jobs", {"tenant_id": "t" * MB})
        assert pinned["code"] == "TENANT_PINNED"
