"""The `mcp-jobs` command: `main` is the console script's entry point."""

from mcp_jobs.cli.entry import main
from mcp_jobs.cli.parser import build_parser

__all__ = ["build_parser", "main"]
