"""`pause_queue` refuses a queue or job name or a reason with a control character (a newline, a
terminal escape, a bidi override), a name a command line reads as an option, and the queue '*',
as INVALID_ARGUMENT whose fix, made as given, succeeds; `resume_queue` still lifts a pause
stored under such a name before the rule."""

from __future__ import annotations

import json
from typing import Any

import pytest

from engine import Jobs
from engine.drivers.base import PAUSES, require
from tests.mcp.conftest import OpenMcp


def _call(fix: str) -> tuple[str, dict[str, Any]]:
    tool, _, arguments = fix.partition(" ")
    return tool, json.loads(arguments)


@pytest.mark.parametrize(
    ("asked", "paused"),
    [
        ({"queue": "mail\x1b[31m"}, ("queue", "mail", None)),
        ({"queue": "-mail"}, ("queue", "mail", None)),
        ({"job": "greet\nFAKE LOG LINE"}, ("job", "greetFAKE LOG LINE", None)),
        ({"job": "gr\u202eeet"}, ("job", "greet", None)),
        (
            {"queue": "mail", "reason": "smtp down\nERROR forged"},
            ("queue", "mail", "smtp down ERROR forged"),
        ),
        ({"queue": "mail", "reason": "\r\n"}, ("queue", "mail", None)),
    ],
)
async def test_pause_queue_refuses_a_name_or_reason_that_forges_a_line_and_its_fix_runs(
    jobs: Jobs, open_mcp: OpenMcp, asked: dict[str, Any], paused: tuple[str, str, str | None]
) -> None:
    async with open_mcp() as mcp:
        error = await mcp.fails("pause_queue", asked, "INVALID_ARGUMENT")
        assert error["retryable"] is False
        tool, arguments = _call(error["fix"])
        assert tool == "pause_queue"
        answer = await mcp.ok(tool, arguments)
    pause = answer["pause"]
    assert (pause["kind"], pause["name"], pause.get("reason")) == paused
    assert [(p.kind, p.name) for p in await jobs.pauses()] == [paused[:2]]


@pytest.mark.parametrize(
    ("asked", "listing"),
    [
        ({"queue": "*"}, "queue_stats"),
        ({"queue": "-"}, "queue_stats"),
        ({"job": "--"}, "describe_jobs"),
    ],
)
async def test_pause_queue_of_a_name_with_nothing_near_is_refused_and_its_fix_lists_names(
    jobs: Jobs, open_mcp: OpenMcp, asked: dict[str, Any], listing: str
) -> None:
    """'*' is no queue a job can be in (to a worker it is every queue, and no pause holds every
    queue), '-' none either: the fix is the listing, to pause the ones meant."""
    async with open_mcp() as mcp:
        error = await mcp.fails("pause_queue", asked, "INVALID_ARGUMENT")
        assert error["next_call"] == {"tool": listing, "arguments": {}}
        await mcp.ok(error["next_call"]["tool"], error["next_call"]["arguments"])
    assert await jobs.pauses() == []


async def test_resume_queue_lifts_a_pause_stored_under_a_bad_name_before_the_rule(
    jobs: Jobs, open_mcp: OpenMcp
) -> None:
    store = require(jobs.driver, PAUSES)
    await store.pause("queue", "ma\nil", "ops\x1b[2J", "smtp\ndown", jobs.clock.now_ms())
    await store.pause("job", "-greet", None, None, jobs.clock.now_ms())
    async with open_mcp() as mcp:
        for arguments in ({"queue": "ma\nil"}, {"job": "-greet"}):
            resumed = await mcp.ok("resume_queue", arguments)
            assert resumed["was_paused"] is True
    assert await jobs.pauses() == []


@pytest.mark.parametrize(
    ("tool", "asked"),
    [
        ("pause_queue", {}),
        ("pause_queue", {"queue": None}),
        ("pause_queue", {"reason": "smtp down"}),
        ("resume_queue", {}),
        ("resume_queue", {"queue": None}),
    ],
)
async def test_a_call_naming_nothing_says_no_queue_was_given(
    jobs: Jobs, open_mcp: OpenMcp, tool: str, asked: dict[str, Any]
) -> None:
    """In the caller's words: it wrote no queue, so the refusal is not `queue=None` (the
    engine's Python), and its fix lists the queues."""
    async with open_mcp() as mcp:
        error = await mcp.fails(tool, asked, "INVALID_ARGUMENT")
    assert error["cause"].startswith("no queue was given"), error["cause"]
    assert "None" not in error["cause"]
    assert error["next_call"] == {"tool": "queue_stats", "arguments": {}}
