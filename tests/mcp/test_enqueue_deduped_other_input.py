"""An enqueue deduped into a live job that differs from the call says so (exploreS, exploreU):
the answer was `deduped: true` alone, and an agent that enqueued again with its input corrected,
or asked for "now" or "urgent", believed its call would run. The same call, however written,
carries no such notice."""

from __future__ import annotations

from typing import Any

import pytest

from engine import Jobs
from tests.mcp.conftest import OpenMcp


def _codes(answer: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {n["code"]: n for n in answer.get("notices") or []}


async def test_a_dedupe_into_other_input_says_the_given_input_was_not_stored(
    jobs: Jobs, open_mcp: OpenMcp
) -> None:
    async with open_mcp() as mcp:
        first = await mcp.ok("enqueue_job", {"name": "greet", "input": {"user_id": 7, "note": "a"}})
        again = await mcp.ok("enqueue_job", {"name": "greet", "input": {"user_id": 7, "note": "b"}})
        notice = _codes(again)["DEDUPED_OTHER_INPUT"]
        assert again["deduped"] is True and again["job_id"] == first["job_id"], again
        assert notice["severity"] == "warning" and "its input (note)" in notice["cause"], notice
        assert "'greet:7'" in notice["cause"] and notice["job_ids"] == [first["job_id"]], notice
        # Its call shows the live job's input, as its fix line does.
        shown = await mcp.ok(notice["next_call"]["tool"], notice["next_call"]["arguments"])
        assert shown["job"]["input"] == {"user_id": 7, "note": "a"}, shown
        assert f"jobs show {first['job_id']} --json" in notice["fix"], notice["fix"]
    assert (await jobs.get(first["job_id"])).input == {"user_id": 7, "note": "a"}


@pytest.mark.parametrize("written", [{"user_id": 7, "note": ""}, {"user_id": 7}])
async def test_the_same_input_however_written_carries_no_notice(
    open_mcp: OpenMcp, written: dict[str, Any]
) -> None:
    async with open_mcp() as mcp:
        await mcp.ok("enqueue_job", {"name": "greet", "input": {"user_id": 7}})
        again = await mcp.ok("enqueue_job", {"name": "greet", "input": written})
    assert again["deduped"] is True and "DEDUPED_OTHER_INPUT" not in _codes(again), again


async def test_a_dedupe_that_asked_another_priority_or_time_says_so(
    jobs: Jobs, open_mcp: OpenMcp
) -> None:
    later = {"name": "greet", "input": {"user_id": 8}, "delay_seconds": 3600}
    async with open_mcp() as mcp:
        first = await mcp.ok("enqueue_job", later)
        now = await mcp.ok("enqueue_job", {"name": "greet", "input": {"user_id": 8}})
        assert "not now" in _codes(now)["DEDUPED_OTHER_INPUT"]["cause"], now
        urgent = await mcp.ok("enqueue_job", {**later, "priority": 10})
        cause = _codes(urgent)["DEDUPED_OTHER_INPUT"]["cause"]
        assert "its priority is 0, not 10" in cause and "due at" not in cause, cause
        sooner = await mcp.ok("enqueue_job", {**later, "delay_seconds": 60})
        assert ", not at " in _codes(sooner)["DEDUPED_OTHER_INPUT"]["cause"], sooner
        # The same schedule asked again (a second later by the call's clock) is no difference.
        same = await mcp.ok("enqueue_job", later)
        assert "DEDUPED_OTHER_INPUT" not in _codes(same), same
    stored = await jobs.get(first["job_id"])
    assert stored.priority == 0 and stored.state == "delayed", stored
