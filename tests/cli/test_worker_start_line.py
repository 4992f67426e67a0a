"""The line a worker logs as it starts names what it claims from: every queue, its queues, or,
with no job registered (no --app), no queue at all (it read "from  on uvloop")."""

from __future__ import annotations

from mcp_jobs.cli.serve import _queues_said


def test_the_start_line_names_the_queues_or_says_there_are_none() -> None:
    assert _queues_said(None) == "every queue"
    assert _queues_said(["mail", "billing"]) == "mail, billing"
    assert _queues_said([]) == "no queue"
