"""The words of an `mcp-jobs` command line that the engine's fix lines read and write."""

from __future__ import annotations

from collections.abc import Sequence

PROGRAM = "mcp-jobs"
DATABASE_FLAG = "--database-url"
MEMORY_URL = "memory://"
# The subcommands that take --database-url, --app and --tenant after them (cli/parser.py).
TAKES_CONTEXT = frozenset(
    {"serve", "worker", "jobs", "backfill", "db", "queues", "limits", "events", "dashboard"}
)
END_OF_OPTIONS = "--"


def end_of_options(rest: Sequence[str]) -> int:
    """Where a `--` stands in `rest` (past it every word is a name), else its length."""
    return rest.index(END_OF_OPTIONS) if END_OF_OPTIONS in rest else len(rest)
