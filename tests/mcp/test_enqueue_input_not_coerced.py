"""A job's input is taken as the JSON its published schema describes, not as pydantic's lax mode
reads it: `true` is no user id (it read as 1, and deduped into user 1's live job), `false` no
order id, "1_0" no number. The same job known only by a worker's published descriptor refuses
them already (engine/descriptors.py); a server that imported the app now agrees."""

from __future__ import annotations

from typing import Any

import pytest

from engine import Jobs
from tests.mcp.conftest import OpenMcp
from tests.mcp.support import stored_rows


@pytest.mark.parametrize(
    ("name", "input"),
    [
        ("greet", {"user_id": True}),
        ("fulfil", {"order_id": False}),
        ("greet", {"user_id": "1_0"}),
        ("greet", {"user_id": 5, "note": 7}),
    ],
)
async def test_an_input_the_schema_refuses_is_not_coerced_into_another_job(
    jobs: Jobs, open_mcp: OpenMcp, name: str, input: dict[str, Any]
) -> None:
    await jobs.enqueue("greet", {"user_id": 1})
    before = await stored_rows(jobs, "jobs")
    async with open_mcp() as mcp:
        refused = await mcp.fails(
            "enqueue_job", {"name": name, "input": input}, "JOB_INPUT_INVALID"
        )
        assert refused["retryable"] is False
        assert refused["next_call"] == {"tool": "describe_jobs", "arguments": {"name": name}}
        (field,) = input.keys() - {"user_id"} or {"user_id"}
        assert refused["details"]["errors"][0]["loc"] == [field]
        await mcp.ok(refused["next_call"]["tool"], refused["next_call"]["arguments"])
    assert await stored_rows(jobs, "jobs") == before


async def test_an_input_the_schema_takes_is_still_enqueued(jobs: Jobs, open_mcp: OpenMcp) -> None:
    async with open_mcp() as mcp:
        made = await mcp.ok("enqueue_job", {"name": "greet", "input": {"user_id": 2}})
    assert (await jobs.get(made["job_id"])).input == {"user_id": 2, "note": ""}
