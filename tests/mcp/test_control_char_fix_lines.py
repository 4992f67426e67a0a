"""Over MCP a fix naming a value with a control character is one printable line: bash's `$'…'`
names the value, where '…' held a raw newline (valid JSON, but no longer one line)."""

from __future__ import annotations

from engine import Jobs
from engine.drivers.base import PAUSES, require
from mcp_jobs.config import Settings
from tests.mcp.conftest import OpenMcp
from tests.support.fix_lines import command_words


async def test_the_resume_command_of_a_queue_with_a_newline_is_one_line(
    jobs: Jobs, open_mcp: OpenMcp
) -> None:
    # Stored before the name rule refused such a pause: written past the client.
    await require(jobs.driver, PAUSES).pause("queue", "ma\nil", None, None, jobs.clock.now_ms())
    # Read-only: the resume is a command, not the resume_queue call it does not serve.
    async with open_mcp(Settings(read_only=True)) as mcp:
        (paused,) = [
            f for f in (await mcp.ok("diagnose_queue"))["findings"] if f["code"] == "QUEUE_PAUSED"
        ]
    fix = paused["fix"]
    assert fix.isprintable(), fix
    assert "$'ma\\nil'" in fix
    assert command_words(fix)[:4] == ["mcp-jobs", "queues", "resume", "ma\nil"]
