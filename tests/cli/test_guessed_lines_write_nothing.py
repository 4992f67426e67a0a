"""A line the CLI guessed (an action moved under the command that has it, a slip of the keys in
a command's, an action's or a backfill's name) never comes back as the write: it is the
command's plan (`db prune --dry-run`, `jobs retry-all` without `--yes`, `backfill NAME` without
`--write`), and a command that writes with no plan to show comes back as its `--help`."""

from __future__ import annotations

import json
from typing import Any

import pytest

from mcp_jobs.cli import main
from tests.cli.test_prune import seed
from tests.support.fix_lines import command_words

# The words the typed line's --json and --database-url add to a fix, left out of the comparison.
_CONTEXT = ("--json", "--database-url")


def _migrated(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["db", "migrate", "--database-url", url]) == 0
    capsys.readouterr()


def _fix(
    argv: list[str], url: str, capsys: pytest.CaptureFixture[str], status: int = 2
) -> tuple[dict[str, Any], list[str]]:
    """The refusal of `argv` on `url`, and its fix's words after the program, without the
    context flags."""
    assert main([*argv, "--json", "--database-url", url]) == status
    error: dict[str, Any] = json.loads(capsys.readouterr().out)["error"]
    words = command_words(error["fix"])[1:]
    kept: list[str] = []
    skip = False
    for word in words:
        if skip:
            skip = False
        elif word in _CONTEXT:
            skip = word == "--database-url"
        else:
            kept.append(word)
    return error, kept


PLANNED = [
    # Moved under the one command that has the action.
    (["jobs", "prune", "--older-than", "1s"], ["db", "prune", "--dry-run", "--older-than", "1s"]),
    (["jobs", "prune", "--dry-run"], ["db", "prune", "--dry-run"]),
    (["queues", "retry-all", "--yes"], ["jobs", "retry-all"]),
    (
        ["db", "cancel-all", "--state", "ready", "--yes"],
        ["jobs", "cancel-all", "--state", "ready"],
    ),
    # A slip of the keys in the action's or the command's name.
    (["db", "prun", "--older-than", "1s"], ["db", "prune", "--dry-run", "--older-than", "1s"]),
    (["backfil", "normalize_emails", "--write", "--wait", "3"], ["backfill", "normalize_emails"]),
]


@pytest.mark.parametrize(("argv", "planned"), PLANNED)
def test_a_guessed_line_that_writes_comes_back_as_its_plan(
    argv: list[str], planned: list[str], url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    error, words = _fix(argv, url, capsys)
    assert error["code"] == "INVALID_ARGUMENT"
    assert words == planned, error["fix"]


def test_the_moved_prune_line_run_as_printed_deletes_nothing(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The probe's case: `jobs prune --older-than 1s` printed `db prune --older-than 1s`, and
    running it deleted every settled job at once."""
    seed(url)
    _, words = _fix(["jobs", "prune", "--older-than", "1s"], url, capsys)
    assert main([*words, "--database-url", url, "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["mode"] == "dry_run" and sum(plan["by_state"].values()) == 3
    assert main(["jobs", "ls", "--database-url", url, "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["jobs"]) == 3  # all still stored


def test_a_slipped_backfill_name_comes_back_as_its_dry_run(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _migrated(url, capsys)
    argv = ["backfill", "normalize_emial", "--write", "--app", "examples.shop"]
    error, words = _fix(argv, url, capsys, status=1)
    assert error["code"] == "BACKFILL_UNKNOWN"
    assert words == ["backfill", "normalize_emails", "--app", "examples.shop"], error["fix"]


HELPED = [
    # Writes with no plan-only form: the help of the command meant, which acts on nothing.
    (["queues", "cancel", "01abc"], ["jobs", "cancel", "--help"]),
    (["db", "retry", "01abc"], ["jobs", "retry", "--help"]),
    (["jobs", "pause", "orders"], ["queues", "pause", "--help"]),
    (["jobs", "resume", "orders"], ["queues", "resume", "--help"]),
    (["db", "send", "paid", "7"], ["events", "send", "--help"]),
    (["db", "drain"], ["jobs", "drain", "--help"]),
    (["jobs", "migrate"], ["db", "migrate", "--help"]),
    (["jobs", "cancle", "01abc"], ["jobs", "cancel", "--help"]),
    (["jobs", "enqueu", "note", "--input", "{}"], ["jobs", "enqueue", "--help"]),
    (["workr"], ["worker", "--help"]),
]


@pytest.mark.parametrize(("argv", "helped"), HELPED)
def test_a_guessed_write_with_no_plan_comes_back_as_its_help(
    argv: list[str], helped: list[str], url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    error, words = _fix(argv, url, capsys)
    assert words == helped, error["fix"]
    with pytest.raises(SystemExit) as shown:  # argparse's help exits 0 once printed
        main(words)
    assert shown.value.code == 0 and capsys.readouterr().out.startswith("usage: ")


def test_a_moved_read_still_comes_back_as_the_line(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _, words = _fix(["queues", "diagnose", "--queue", "mail"], url, capsys)
    assert words == ["jobs", "diagnose", "--queue", "mail"]
