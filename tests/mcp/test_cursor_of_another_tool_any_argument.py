"""A real list_jobs cursor and real describe_jobs cursors (of a short name and a long one), each
sent as every cursor argument of every tool but its own, through the in-process MCP server: each
is CURSOR_WRONG_TOOL naming the tool it came from, whose fix (this tool's first page) runs. The
published schemas refused a cursor longer than the argument's own kind (a list_jobs cursor as
inspect_job's steps_cursor, a long job name as list_jobs' cursor) before the owner check could
name it, and inspect_job and list_backfills took a describe_jobs cursor (a name) for a malformed
one; a cursor longer than any tool hands out is still refused, typed and not retryable."""

from __future__ import annotations

import json
from typing import Any

import pytest

from engine import JobContext, JobRegistry, Jobs, job
from engine.backfill import BackfillRegistry
from engine.paging import (
    MAX_CURSOR_BYTES,
    MAX_LIST_CURSOR_BYTES,
    MAX_RUNS_CURSOR_BYTES,
    parse_names_cursor,
)
from mcp_jobs.server.mended_call import is_cursor
from tests.backfill.support import Customers
from tests.mcp.conftest import OpenMcp
from tests.mcp.support import Caller, Greet

CODE = "CURSOR_WRONG_TOOL"
# Far past any cursor a tool hands out.
HUGE = 10_000
# Longer than a list_jobs cursor, a backfill's runs cursor and a steps cursor: a job name may be.
LONG_NAME = "a_" + "long_job_name_" * 9
BACKFILL = "normalize_emails"
NAMES = ("describe_jobs", "cursor")


def _declare_long_named(registry: JobRegistry) -> None:
    @job(name=LONG_NAME, idempotency_key=lambda i: f"long:{i.user_id}", registry=registry)
    async def long_named(input: Greet, ctx: JobContext) -> None:
        """A job whose name sorts first and is longer than any other cursor."""


async def _cursor_arguments(mcp: Caller) -> dict[str, list[str]]:
    """Every tool's cursor arguments, as its published input schema has them."""
    found: dict[str, list[str]] = {}
    for tool in (await mcp.client.list_tools()).tools:
        names = [name for name in tool.input_schema.get("properties", {}) if is_cursor(name)]
        if names:
            found[tool.name] = names
    return found


async def _refused_naming(
    mcp: Caller, tool: str, arguments: dict[str, Any], owner: tuple[str, str]
) -> str | None:
    """None when `tool` refuses `arguments` naming `owner` with a fix that runs; else what
    it answered instead (its code)."""
    answer = await mcp.call(tool, arguments)
    if not (answer.is_error and answer.code == CODE):
        return f"{tool}({', '.join(arguments)}) from {owner[0]}: {answer.code}"
    error = answer.data["error"]
    assert (error["details"]["tool"], error["details"]["tool_argument"]) == owner, error
    assert error["retryable"] is False
    called, _, rest = error["fix"].partition(" ")
    assert error["next_call"] == {"tool": called, "arguments": json.loads(rest)}
    assert called == tool and not any(is_cursor(k) for k in json.loads(rest)), error["fix"]
    assert not (await mcp.call(called, json.loads(rest))).is_error, error["fix"]
    return None


@pytest.mark.drivers("memory", "sqlite", reason="cursors are checked before any read")
async def test_every_cursor_argument_names_the_tool_a_cursor_came_from(
    jobs: Jobs,
    app: JobRegistry,
    backfill_registry: BackfillRegistry,
    customers: Customers,
    open_mcp: OpenMcp,
) -> None:
    _declare_long_named(app)
    customers.declare(backfill_registry, batch_size=10)
    async with open_mcp() as mcp:
        for user_id in (1, 2):
            await mcp.ok("enqueue_job", {"name": "greet", "input": {"user_id": user_id}})
        listed = await mcp.ok("list_jobs", {"limit": 1})
        job_id, jobs_cursor = listed["jobs"][0]["id"], listed["next_cursor"]
        long_name = (await mcp.ok("describe_jobs", {"limit": 1}))["next_cursor"]
        short_name = (await mcp.ok("describe_jobs", {"limit": 1, "cursor": long_name}))[
            "next_cursor"
        ]
        assert parse_names_cursor(long_name) == LONG_NAME and len(long_name) > max(
            MAX_LIST_CURSOR_BYTES, MAX_RUNS_CURSOR_BYTES
        )
        assert len(short_name) < MAX_CURSOR_BYTES
        cursors = {jobs_cursor: ("list_jobs", "cursor"), long_name: NAMES, short_name: NAMES}
        needed = {"inspect_job": {"job_id": job_id}, "list_backfills": {"name": BACKFILL}}
        arguments = await _cursor_arguments(mcp)
        assert {"list_jobs", "describe_jobs", "inspect_job", "list_backfills"} <= set(arguments)
        answered = [
            await _refused_naming(mcp, tool, {**needed.get(tool, {}), name: cursor}, owner)
            for tool, names in arguments.items()
            for name in names
            for cursor, owner in cursors.items()
            if owner != (tool, name)
        ]
        assert len(answered) >= 12
        wrong = [answer for answer in answered if answer is not None]
        assert wrong == [], "\n".join(wrong)


@pytest.mark.drivers("memory", reason="refused before any read")
async def test_a_cursor_longer_than_any_tool_hands_out_is_refused_typed(
    jobs: Jobs, backfill_registry: BackfillRegistry, customers: Customers, open_mcp: OpenMcp
) -> None:
    customers.declare(backfill_registry, batch_size=10)
    async with open_mcp() as mcp:
        job_id = (await mcp.ok("enqueue_job", {"name": "greet", "input": {"user_id": 1}}))["job_id"]
        needed = {"inspect_job": {"job_id": job_id}, "list_backfills": {"name": BACKFILL}}
        for tool, names in (await _cursor_arguments(mcp)).items():
            for name in names:
                answer = await mcp.call(tool, {**needed.get(tool, {}), name: "c" * HUGE})
                assert answer.code == "TOOL_ARGUMENTS_INVALID", (tool, name, answer.data)
                error = answer.data["error"]
                assert error["retryable"] is False and len(json.dumps(error)) < HUGE
                first = error["next_call"]  # the first page: the call without the cursor
                assert first["tool"] == tool and name not in first["arguments"], error
                assert not (await mcp.call(tool, first["arguments"])).is_error, error["fix"]
