"""`db prune --older-than` mended in one hop to a line that runs: past ten years (`20 years`,
`5000 days`, a bare `5000`, `-20 years`) the fix is the bound, 3650d, not 7300d or 5000d, whose
line was refused again and only then mended to the bound. And the unit as a word of its own
(`--older-than 1 year`, unquoted) is read by the one rule for words, as the quoted form is:
it was refused with the command's --help (`joined` knew no years)."""

from __future__ import annotations

import json

import pytest

from mcp_jobs.cli import main
from tests.cli.test_prune import seed
from tests.support.fix_lines import command_words

BOUND = "3650d"  # ten years, parse_duration's bound


def _mended(capsys: pytest.CaptureFixture[str], url: str, *typed: str) -> list[str]:
    """The fix's words for `db prune` typed with `typed`, which is refused."""
    seed(url)
    code = main(["db", "prune", "--database-url", url, *typed, "--json"])
    out = capsys.readouterr()
    error = json.loads(out.out)["error"]
    assert code in (1, 2) and error["code"] == "INVALID_ARGUMENT", error
    words = command_words(error["fix"])
    assert "--help" not in words, error
    return words[1:]


def _runs(capsys: pytest.CaptureFixture[str], words: list[str]) -> None:
    assert main([*words, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["ok"] is True


@pytest.mark.parametrize(
    "typed",
    [
        ["--older-than", "20 years"],
        ["--older-than=20 years"],
        ["--older-than", "20", "years"],
        ["--older-than", "20y"],
        ["--older-than", "5000 days"],
        ["--older-than", "5000", "days"],
        ["--older-than", "5000"],
        ["--older-than", "-20 years"],
        ["--older-than", "-5000d"],
    ],
)
def test_past_ten_years_the_first_fix_is_the_bound_and_runs(
    url: str, capsys: pytest.CaptureFixture[str], typed: list[str]
) -> None:
    words = _mended(capsys, url, *typed)
    at = next(n for n, w in enumerate(words) if w.startswith("--older-than"))
    assert words[at].removeprefix("--older-than=") == BOUND or words[at + 1] == BOUND, words
    _runs(capsys, words)


@pytest.mark.parametrize(("typed", "meant"), [("1", "365d"), ("2", "730d"), ("3", "1095d")])
def test_years_as_a_word_of_their_own_are_read_as_the_quoted_form_is(
    url: str, capsys: pytest.CaptureFixture[str], typed: str, meant: str
) -> None:
    unit = "year" if typed == "1" else "years"
    words = _mended(capsys, url, "--dry-run", "--older-than", typed, unit)
    assert words[words.index("--older-than") + 1] == meant, words
    _runs(capsys, words)
