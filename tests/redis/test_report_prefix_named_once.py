"""`mcp-jobs db report` on Redis names the key prefix once, as stored: a prefix ends in its
separator (`mcp-jobs:`), and the line used to add another (`prefix mcp-jobs:: version 1`)."""

from __future__ import annotations

import json

import anyio

from engine.drivers.urls import migrate_fix
from tests.support.fix_lines import report_lines, run_fix, the_line


async def test_the_prefix_line_names_the_prefix_as_stored_once(database_url: str) -> None:
    prefix = database_url.partition("prefix=")[2]
    assert prefix.endswith(":")
    named = f"prefix {json.dumps(prefix)}: "
    lines = await report_lines(database_url)
    assert [line for line in lines if f"{prefix}:" in line] == []
    assert the_line(lines, named) == f"{named}no jobs stored yet (run {migrate_fix(database_url)})"
    await anyio.to_thread.run_sync(lambda: run_fix(migrate_fix(database_url)))
    lines = await report_lines(database_url)
    assert the_line(lines, named) == f"{named}version 1, this package's"
