"""`mcp-jobs --app shop worker`: the options every command takes, given ahead of the command (as
`git -C DIR` is), were read by argparse as the command itself ("invalid choice: 'shop'"), and
the fix was `mcp-jobs --help`. The fix is now the line with them after the command, as typed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mcp_jobs.cli import main
from tests.cli.databases import migrated
from tests.support.fix_lines import command_words, run_fix


@pytest.mark.parametrize(
    ("ahead", "command"),
    [
        (["--app", "exk_options_app"], ["jobs", "ls", "--json"]),
        (["--app=exk_options_app", "--json"], ["jobs", "stats"]),
        (["--json", "--app", "exk_options_app"], ["jobs", "describe", "--limit", "5"]),
    ],
)
def test_options_ahead_of_the_command_are_moved_after_it(
    url: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    ahead: list[str],
    command: list[str],
) -> None:
    (tmp_path / "exk_options_app.py").write_text('"""No jobs: importing it is the point."""\n')
    db = ["--database-url", migrated(url)]
    assert main([*ahead, *command, *db]) == 2
    refused = json.loads(capsys.readouterr().out)["error"]  # --json, typed ahead or after
    assert refused["code"] == "INVALID_ARGUMENT" and not refused["retryable"], refused
    fix = refused["fix"]
    words = command_words(fix)
    assert words[1 : 1 + len(command[:2])] == command[:2], fix
    assert any(w.startswith("--app") for w in words[3:]), fix
    assert json.loads(run_fix(fix))["ok"] is True


def test_a_line_starting_with_any_other_option_is_left_to_the_help(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--verbose", "jobs", "ls"]) == 2
    assert "--help" in capsys.readouterr().err
