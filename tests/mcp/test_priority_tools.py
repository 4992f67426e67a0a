"""Priority over MCP: `enqueue_job` takes one (bounded as published), `describe_jobs` shows the
declared one, `inspect_job` and `list_jobs` the stored one, and claims follow it."""

from __future__ import annotations

from engine import Jobs, rules
from tests.mcp.conftest import OpenMcp


async def test_an_enqueued_priority_is_stored_shown_and_claimed_first(
    jobs: Jobs, open_mcp: OpenMcp
) -> None:
    async with open_mcp() as mcp:
        low = await mcp.ok("enqueue_job", {"name": "greet", "input": {"user_id": 1}})
        high = await mcp.ok(
            "enqueue_job", {"name": "greet", "input": {"user_id": 2}, "priority": 9}
        )
        job = (await mcp.ok("inspect_job", {"job_id": high["job_id"]}))["job"]
        assert job["priority"] == 9
        listed = {j["id"]: j["priority"] for j in (await mcp.ok("list_jobs", {}))["jobs"]}
        assert listed == {low["job_id"]: 0, high["job_id"]: 9}
    claimed = await jobs.driver.claim("w", 2, 60_000)
    assert [c.record.id for c in claimed] == [high["job_id"], low["job_id"]]


async def test_describe_jobs_shows_the_declared_priority_which_enqueues_inherit(
    jobs: Jobs, open_mcp: OpenMcp
) -> None:
    async with open_mcp() as mcp:
        (receipt,) = (await mcp.ok("describe_jobs", {"name": "receipt"}))["jobs"]
        assert receipt["priority"] == 2
        made = await mcp.ok(
            "enqueue_job", {"name": "receipt", "input": {"order_id": 1}, "tenant_id": "t1"}
        )
    assert (await jobs.get(made["job_id"])).priority == 2


async def test_a_priority_out_of_range_is_refused_and_nothing_is_stored(
    jobs: Jobs, open_mcp: OpenMcp
) -> None:
    async with open_mcp() as mcp:
        tools = {t.name: t for t in (await mcp.client.list_tools()).tools}
        published = tools["enqueue_job"].input_schema["properties"]["priority"]
        assert published["minimum"] == rules.PRIORITY_MIN
        assert published["maximum"] == rules.PRIORITY_MAX
        for bad in (rules.PRIORITY_MAX + 1, -1, 2.5, "9"):
            answer = await mcp.call(
                "enqueue_job", {"name": "greet", "input": {"user_id": 3}, "priority": bad}
            )
            assert answer.code in {"INVALID_ARGUMENT", "TOOL_ARGUMENTS_INVALID"}, bad
    assert (await jobs.list()).jobs == []
