"""`TOOL_COMMANDS` is read both ways: the CLI prints a tool call as its command (`cli_command`),
and an MCP caller of a memory:// server is given a command as its tool call (`tool_call_of`).
Each row, with every argument given, must come back as the call it started from."""

from __future__ import annotations

import json
import shlex
from typing import Any

import pytest

from mcp_jobs.cli.mend import without_flag
from mcp_jobs.config import Settings
from mcp_jobs.fix_context import FixContext
from mcp_jobs.tool_commands import TOOL_COMMANDS, tool_call_of

# A value for each argument any row names, of the type the tool takes.
_VALUES: dict[str, Any] = {
    "state": ["dead", "failed"],
    "name": "send_welcome",
    "queue": "emails",
    "tenant_id": "acme",
    "cursor": "c1",
    "limit": 7,
    "job_id": "0123456789abcdef0123456789abcdef",
    "run_id": "fedcba9876543210fedcba9876543210",
    "include_cancelled": True,
    "from_step": "charge",
    "queues": ["emails", "billing"],
    "job": "send_welcome",
    "reason": "vendor outage",
    "key": "order-7",
    "payload": {"ok": True, "n": 2},
    "pending_only": True,
    "runs_limit": 3,
    "runs_cursor": "r1",
    "write": True,
    "force": True,
    "wait_seconds": 30,
    "input": {"order_id": 7, "note": "gift wrap"},
    "delay_seconds": 90,
    "run_at": "2027-01-01T00:00:00Z",
    "on_conflict": "error",
    "priority": 5,
}


def _rows() -> list[tuple[str, dict[str, Any]]]:
    rows = []
    for tool, _, arguments in TOOL_COMMANDS:
        given = {argument: _VALUES[argument] for argument, _ in arguments}
        if tool == "list_backfills":
            given.pop("pending_only")  # a listing of NAME's runs, not the pending list
        rows.append((tool, given))
    return rows


@pytest.mark.parametrize(("tool", "given"), _rows(), ids=lambda v: v if isinstance(v, str) else "")
def test_a_tool_call_printed_as_a_command_reads_back_as_the_same_call(
    tool: str, given: dict[str, Any]
) -> None:
    fixes = FixContext.of(Settings(database_url="sqlite:////tmp/x.db"), face="cli")
    command = fixes.cli_command(f"{tool} {json.dumps(given)}")
    assert command is not None, tool
    words = _command_words(command)
    # The command's context flags are the CLI's own, not the tool's arguments.
    rest = tuple(w for w in words if w not in {"--json"})
    rest = tuple(without_flag(rest, "--database-url"))
    assert tool_call_of(rest) == (tool, given), command


def test_a_command_with_two_positionals_keeps_their_order() -> None:
    fixes = FixContext.of(Settings(database_url="sqlite:////tmp/x.db"), face="cli")
    command = fixes.cli_command('send_event {"name": "paid", "key": "order-7"}')
    assert command is not None
    assert _command_words(command)[:4] == ["events", "send", "paid", "order-7"], command


def _command_words(command: str) -> list[str]:
    """The words after the program of `command`, past any `NAME=value` ahead of it."""
    words = shlex.split(command)
    while "=" in words[0]:
        words.pop(0)
    assert words[0].endswith("mcp-jobs"), command
    return words[1:]
