"""Running `mcp-jobs` in-process for the CLI tests."""

from __future__ import annotations

import json
from typing import Any

import pytest

from mcp_jobs.cli import main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any]:
    """The exit code, and what it printed: parsed JSON with `--json`, else the text."""
    code = main(list(argv))
    out = capsys.readouterr().out
    return code, json.loads(out) if "--json" in argv else out
