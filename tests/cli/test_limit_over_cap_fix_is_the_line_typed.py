"""A `--limit` over the server's cap (LIMIT_EXCEEDED) comes back as the command as typed with the
limit at the cap: no `--json` the operator did not type, and it runs as given."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcp_jobs.cli.entry import main
from tests.cli.databases import migrated
from tests.support.fix_lines import command_words

OVER = [
    ["jobs", "ls", "--limit", "201", "--state", "dead"],
    ["jobs", "describe", "--limit", "500"],
    ["jobs", "ls", "--limit=999"],
]


@pytest.mark.parametrize("argv", OVER)
def test_the_fix_of_a_limit_over_the_cap_is_the_typed_line_at_the_cap(
    argv: list[str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("MCP_JOBS_APP", raising=False)
    url = migrated(f"sqlite:///{tmp_path / 'jobs.db'}")
    assert main([*argv, "--database-url", url]) == 1
    said = capsys.readouterr().err
    assert "error LIMIT_EXCEEDED" in said
    fix = next(line for line in said.splitlines() if line.lstrip().startswith("fix:"))
    words = command_words(fix.split("fix:", 1)[1].strip())[1:]
    assert "--json" not in words
    at_cap = [w.replace("=999", "=200") for w in argv]
    at_cap = ["200" if w in ("201", "500") else w for w in at_cap]
    assert words[: len(at_cap)] == at_cap
    assert main([*words]) == 0
    capsys.readouterr()
