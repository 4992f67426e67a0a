"""A duration written in words (`--since-seconds "7 days"`, `7days`, or `--since 7 days` with the
unit as a word of its own) is still refused, but its fix is the line with the duration the flag
reads (`7d`), which runs, not the command's `--help`: a person types durations so."""

from __future__ import annotations

import pytest

from mcp_jobs.cli import main
from mcp_jobs.cli.parser import build_parser
from tests.cli.databases import migrated
from tests.support.fix_lines import command_words


def _refused(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[str]]:
    code = main(list(argv))
    err = capsys.readouterr().err
    assert "INVALID_ARGUMENT" in err, err
    (fix,) = [line for line in err.splitlines() if line.startswith("  fix:")]
    return code, command_words(fix.removeprefix("  fix:").strip())


@pytest.mark.parametrize(
    ("typed", "meant"),
    [
        (["--since-seconds", "7 days"], 604800),
        (["--since-seconds", "7days"], 604800),
        (["--since-seconds=12 hours"], 43200),
        (["--since-seconds", "30 min"], 1800),
        (["--since", "7", "days"], 604800),
        (["--since-seconds", "2", "weeks"], 1209600),
    ],
)
def test_a_since_in_words_is_mended_to_the_plan_with_its_duration(
    url: str, capsys: pytest.CaptureFixture[str], typed: list[str], meant: int
) -> None:
    migrated(url)
    code, words = _refused(capsys, "jobs", "retry-all", *typed, "--database-url", url)
    assert code == 2
    assert words[0].endswith("mcp-jobs") and "--help" not in words, words
    parsed = build_parser().parse_args(words[1:])  # the fix parses, as given
    assert parsed.since_seconds == meant and not parsed.yes
    assert main(words[1:]) == 0  # and runs: retry-all without --yes prints the plan
    capsys.readouterr()


@pytest.mark.parametrize("typed", [["--older-than", "7 days"], ["--older-than", "7", "days"]])
def test_a_prune_age_in_words_is_mended(
    url: str, capsys: pytest.CaptureFixture[str], typed: list[str]
) -> None:
    migrated(url)
    code, words = _refused(capsys, "db", "prune", "--dry-run", *typed, "--database-url", url)
    assert code in (1, 2)
    parsed = build_parser().parse_args(words[1:])
    assert parsed.older_than == "7d" and parsed.dry_run, words
    assert main(words[1:]) == 0
    capsys.readouterr()


def test_words_that_are_no_duration_keep_the_help_fix(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    migrated(url)
    for typed in (["--since-seconds", "seven days"], ["--since-seconds", "7", "apples"]):
        _, words = _refused(capsys, "jobs", "retry-all", *typed, "--database-url", url)
        assert words[-1] == "--help", words
