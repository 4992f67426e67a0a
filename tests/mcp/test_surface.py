"""The published surface: twelve tools with envelopes and annotations; read-only registers none
that mutate; argument errors come back as the tool's own envelope."""

from __future__ import annotations

import anyio
import pytest
from mcp import Client, MCPError
from mcp.types import INVALID_PARAMS

from engine import JobRegistry, Jobs
from mcp_jobs.config import Settings
from mcp_jobs.server import MUTATING_TOOLS, READ_TOOLS, build_server
from tests.mcp.conftest import OpenMcp
from tests.mcp.support import Caller, serve

ALL_TOOLS = {*READ_TOOLS, *MUTATING_TOOLS}


async def test_every_design_tool_is_published_with_an_envelope_schema(
    jobs: Jobs, app: JobRegistry, mode: str
) -> None:
    server = build_server(Settings(), jobs)
    async with Client(server, mode=mode) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert (
        set(tools)
        == ALL_TOOLS
        == {
            "describe_jobs",
            "enqueue_job",
            "list_jobs",
            "inspect_job",
            "queue_stats",
            "diagnose_queue",
            "database_report",
            "retry_job",
            "cancel_job",
            "run_backfill",
            "list_backfills",
            "wait_for_job",
            "prune_history",
            "retry_jobs",
            "cancel_jobs",
            "pause_queue",
            "resume_queue",
            "send_event",
        }
    )
    for tool in tools.values():
        schema = tool.output_schema
        assert schema is not None and schema["type"] == "object", tool.name
        assert "ok" in schema["properties"] and "error" in schema["properties"], tool.name
        # Only `ok` is required: a failure carries no payload and must still validate.
        assert schema.get("required", []) == ["ok"], tool.name
        assert tool.description and len(tool.description) > 80, tool.name
        assert tool.annotations is not None, tool.name
    for name in READ_TOOLS:
        hints = tools[name].annotations
        assert hints is not None and hints.read_only_hint is True, name
    for name in MUTATING_TOOLS:
        hints = tools[name].annotations
        assert hints is not None and hints.read_only_hint is False, name
    cancel = tools["cancel_job"].annotations
    assert cancel is not None and cancel.destructive_hint is True
    enqueue = tools["enqueue_job"].annotations
    assert enqueue is not None and enqueue.destructive_hint is False
    retry = tools["retry_job"].annotations
    assert retry is not None and retry.idempotent_hint is True


async def test_read_only_registers_no_mutating_tool(
    jobs: Jobs, app: JobRegistry, mode: str
) -> None:
    async with serve(jobs, mode, Settings(read_only=True)) as mcp:
        assert set(mcp.schemas) == set(READ_TOOLS)
        with pytest.raises(MCPError) as raised:  # not served: JSON-RPC invalid params
            await mcp.client.call_tool("enqueue_job", {"name": "greet", "input": {}})
        assert raised.value.code == INVALID_PARAMS
        prompts = {p.name for p in (await mcp.client.list_prompts()).prompts}
        assert prompts == {"diagnose_stalled_jobs"}
    assert (await jobs.list()).jobs == []


async def test_arguments_the_sdk_rejects_come_back_as_the_tools_envelope(
    open_mcp: OpenMcp,
) -> None:
    async with open_mcp() as mcp:
        await _rejected_arguments(mcp)


async def _rejected_arguments(mcp: Caller) -> None:
    missing = await mcp.fails("enqueue_job", {"input": {}}, "TOOL_ARGUMENTS_INVALID")
    assert missing["details"]["errors"][0]["loc"] == ["name"]
    assert missing["fix"].startswith("enqueue_job {")
    bad_state = await mcp.fails("list_jobs", {"state": "finished"}, "TOOL_ARGUMENTS_INVALID")
    assert bad_state["details"]["tool"] == "list_jobs"
    await mcp.fails("inspect_job", {}, "TOOL_ARGUMENTS_INVALID")


async def test_an_unexpected_crash_is_internal_with_a_logged_correlation_id(
    jobs: Jobs, registry: JobRegistry, mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    from tests.mcp.support import declare_weird

    declare_weird(registry)
    async with serve(jobs, mode) as mcp:
        error = await mcp.fails("describe_jobs", {}, "INTERNAL")
    correlation_id = error["details"]["correlation_id"]
    assert correlation_id in error["cause"] and error["retryable"] is True
    assert "Traceback" not in error["cause"]
    logged = [r for r in caplog.records if r.name == "mcp_jobs.server"]
    assert any(correlation_id in r.getMessage() and r.exc_info for r in logged)
    # The fix shows the traceback, as given.
    with anyio.fail_after(30):
        shown = await anyio.run_process(error["fix"], check=False)
    assert shown.returncode == 0, shown.stderr
    assert f"correlation_id: {correlation_id}" in shown.stdout.decode()
    assert "Traceback (most recent call last)" in shown.stdout.decode()
