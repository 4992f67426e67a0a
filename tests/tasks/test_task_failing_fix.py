"""A TASK_FAILING finding whose stored error's fix is JOB_INPUT_INVALID's (the job's description,
`mcp-jobs jobs describe tick --json`, with the `describe_jobs` tool call beside it) is written
for its reader like any other finding's: the line that runs as given, and the tool call an MCP
client makes — never a tool call printed as a shell line, nor prose glued in front of one."""

from __future__ import annotations

import pytest

from engine import JobRegistry, Jobs, ManualClock, Worker
from engine.tasks import Scheduler, task
from mcp_jobs.cli import main
from mcp_jobs.config import Settings
from mcp_jobs.operations.diagnose import diagnose_queue
from mcp_jobs.operations.models import Finding
from mcp_jobs.operations.scope import Scope
from tests.support.fix_lines import command_words
from tests.tasks.test_task_failing import declare_tick

MINUTE = 60_000


async def _failing(jobs: Jobs, settings: Settings, face: str) -> Finding:
    scope = Scope(jobs, settings, "diagnose_queue", "test", face=face)  # type: ignore[arg-type]
    findings = (await diagnose_queue(scope)).findings or []
    (finding,) = [f for f in findings if f.code == "TASK_FAILING"]
    return finding


@pytest.mark.drivers("sqlite", reason="the CLI runs the fix line against the same file")
async def test_a_tool_call_fix_is_the_cli_line_at_the_terminal_and_the_call_over_mcp(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock, database_url: str
) -> None:
    tick = declare_tick(registry)
    task(
        name="bad-input",
        cron="* * * * *",
        tz="UTC",
        enqueue=lambda at: [(tick, {"when": at})],
        registry=registry,
    )
    # The app the worker ran is importable here, so the line runs as given.
    await Worker(jobs, apps=["tests.tasks.test_task_failing"]).publish_descriptors()
    scheduler = Scheduler(jobs, holder="only")
    clock.advance(MINUTE)
    assert "bad-input" in (await scheduler.round()).failed
    settings = Settings(database_url=database_url)

    over_mcp = await _failing(jobs, settings, "mcp")
    # JOB_INPUT_INVALID's fix is the describe command (a Python caller runs it too), written
    # to run as given; the tool call beside it is what an MCP client runs.
    mcp_words = command_words(over_mcp.fix)
    assert mcp_words[:4] == ["mcp-jobs", "jobs", "describe", "tick"], over_mcp.fix
    assert mcp_words[mcp_words.index("--database-url") + 1] == database_url
    assert over_mcp.next_call is not None and over_mcp.next_call.tool == "describe_jobs"
    assert over_mcp.next_call.arguments == {"name": "tick"}
    assert await _run(mcp_words[1:]) == 0
    # The declaration is what must change: the cause says so, the fix shows what tick takes.
    assert "bad-input" in over_mcp.cause and "JOB_INPUT_INVALID" in over_mcp.cause

    at_terminal = await _failing(jobs, settings, "cli")
    words = command_words(at_terminal.fix)
    assert words[:4] == ["mcp-jobs", "jobs", "describe", "tick"] and "{" not in at_terminal.fix
    assert words[words.index("--database-url") + 1] == database_url
    # It runs as given: the published descriptor of tick, with no app imported.
    assert await _run(words[1:]) == 0


async def _run(argv: list[str]) -> int:
    import anyio

    return await anyio.to_thread.run_sync(lambda: main(argv))
