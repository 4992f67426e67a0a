"""On a `memory://` server the store lives in the server's process: an `mcp-jobs …` line run in
a shell (`--database-url memory://`) opens a new, empty store of its own, so a fix written as
one cannot do what it says. There the fix is the tool call that does the same, which runs."""

from __future__ import annotations

import json

import pytest

from engine import Jobs
from mcp_jobs.config import Settings
from mcp_jobs.fix_context import FixContext
from tests.mcp.conftest import OpenMcp

MEMORY = Settings(database_url="memory://")


@pytest.mark.drivers("memory", reason="the server's store is this process's memory")
async def test_a_memory_servers_fixes_are_tool_calls_that_run(
    jobs: Jobs, open_mcp: OpenMcp
) -> None:
    async with open_mcp(MEMORY) as mcp:
        made = await mcp.ok("enqueue_job", {"name": "greet", "input": {"user_id": 1}})
        twice = {"name": "greet", "input": {"user_id": 1}, "on_conflict": "error"}
        refusals = [
            await mcp.fails("inspect_job", {"job_id": "nope"}, "JOB_NOT_FOUND"),
            await mcp.fails("describe_jobs", {"name": "nope"}, "JOB_UNKNOWN"),
            await mcp.fails("list_jobs", {"queue": "nope"}, "QUEUE_UNKNOWN"),
            await mcp.fails("run_backfill", {"name": "nope"}, "BACKFILL_UNKNOWN"),
            await mcp.fails("enqueue_job", twice, "JOB_DUPLICATE"),
        ]
        resumed = await mcp.ok("resume_queue", {"queue": "nope"})
        diagnosed = await mcp.ok("diagnose_queue", {"queue": "nope"})
        fixes = [r["fix"] for r in refusals] + [n["fix"] for n in resumed["notices"]]
        fixes += [f["fix"] for f in diagnosed["findings"] if f["code"] == "QUEUE_UNKNOWN"]
        assert len(fixes) == 7
        for fix in fixes:
            assert "mcp-jobs" not in fix and "memory://" not in fix, fix
            tool, _, arguments = fix.partition(" ")
            answer = await mcp.call(tool, json.loads(arguments))
            assert not answer.is_error, (fix, answer.data)
        # The duplicate's fix shows the live job it names, in this server's store.
        assert json.loads(refusals[-1]["fix"].partition(" ")[2]) == {"job_id": made["job_id"]}


def test_a_command_no_tool_does_is_said_in_words_on_a_memory_server() -> None:
    memory = FixContext.of(MEMORY)
    line = memory.qualify("mcp-jobs jobs drain --queues mail")
    assert not line.startswith("mcp-jobs") and "memory://" in line and "sqlite:///" in line
    assert memory.qualify(line) == line  # applied twice, nothing changes
    # A pinned tenant's caller is offered no call to a tool that spans every tenant.
    pinned = FixContext.of(Settings(database_url="memory://", tenant="acme"))
    assert not pinned.qualify("mcp-jobs db report").startswith("database_report")


def test_a_shared_stores_fix_stays_the_command(tmp_path: object) -> None:
    url = f"sqlite:///{tmp_path}/jobs.db"
    line = FixContext.of(Settings(database_url=url)).qualify("mcp-jobs jobs ls --json")
    # (An app another test imported may declare environment: assignments come first.)
    assert "mcp-jobs jobs ls --json" in line and url in line
    # The CLI's own lines stay commands (each CLI process is its own store there anyway).
    cli = FixContext.of(MEMORY, face="cli").qualify("mcp-jobs jobs ls --json")
    assert "mcp-jobs jobs ls --json --database-url memory://" in cli
