"""The `mcp-jobs` command: `main` is the console script's entry point.

`main` is defined here, before the command's modules are imported (about a second, which a
Ctrl-C often interrupts): it imports them inside its own handler, so an interrupt then exits 130
without a traceback, as one during the command does (entry.py).
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from mcp_jobs.cli.exit_status import INTERRUPTED_EXIT

if TYPE_CHECKING:
    from mcp_jobs.cli.parser import build_parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        from mcp_jobs.cli.entry import main as run

        return run(argv)
    except KeyboardInterrupt:
        return INTERRUPTED_EXIT


def __getattr__(name: str) -> Any:
    if name != "build_parser":
        raise AttributeError(f"module 'mcp_jobs.cli' has no attribute {name!r}")
    value = importlib.import_module("mcp_jobs.cli.parser").build_parser
    globals()[name] = value
    return value


__all__ = ["build_parser", "main"]
