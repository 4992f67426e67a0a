"""`--dry-run` and `--yes` together contradict each other: the parser refuses the line (exit 2,
INVALID_ARGUMENT) on every command that has both, where it used to plan and act on nothing
without a word; the fix is the plan, the line without `--yes`."""

from __future__ import annotations

import argparse
import json

import pytest

from mcp_jobs.cli import main
from mcp_jobs.cli.parser import build_parser
from tests.support.fix_lines import command_words


def _with_both(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> list[list[str]]:
    """Every command line (as words) whose command takes both --dry-run and --yes."""
    found: list[list[str]] = []
    options = {o for action in parser._actions for o in action.option_strings}
    if {"--dry-run", "--yes"} <= options:
        found.append(list(path))
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found += _with_both(sub, (*path, name))
    return found


COMMANDS = _with_both(build_parser())


def test_the_commands_with_both_flags_are_found() -> None:
    assert ["jobs", "retry-all"] in COMMANDS and ["jobs", "cancel-all"] in COMMANDS


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_dry_run_with_yes_is_refused_and_its_fix_is_the_plan(
    command: list[str], url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["db", "migrate", "--database-url", url]) == 0
    capsys.readouterr()
    argv = [*command, "--dry-run", "--yes", "--database-url", url, "--json"]
    assert main(argv) == 2
    error = json.loads(capsys.readouterr().out)["error"]
    assert (error["code"], error["retryable"]) == ("INVALID_ARGUMENT", False)
    assert "--yes" in error["cause"] and "--dry-run" in error["cause"]
    words = command_words(error["fix"])[1:]
    assert "--yes" not in words and words[: len(command)] == command, error["fix"]
    assert main(words) == 0
    assert json.loads(capsys.readouterr().out)["mode"] == "plan"  # acted on nothing
