"""`--since-seconds` past its ten years, typed as a duration or in words, mends to a line that
runs at once: `'20 years'` was mended to 7300d, whose line was refused again with the command's
--help (a duration typed for a whole-second flag was not found on the line to mend)."""

from __future__ import annotations

import json

import pytest

from mcp_jobs.cli import main
from tests.cli.databases import migrated
from tests.support.fix_lines import command_words


@pytest.mark.parametrize("typed", ["20 years", "7300d", "630720000"])
def test_since_seconds_past_ten_years_is_mended_to_a_line_that_runs(
    typed: str, url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    migrated(url)
    argv = ["jobs", "retry-all", "--since-seconds", typed, "--database-url", url, "--json"]
    code = main(argv)
    error = json.loads(capsys.readouterr().out)["error"]
    assert code in (1, 2) and error["code"] == "INVALID_ARGUMENT", error
    words = command_words(error["fix"])
    assert "--help" not in words, error
    since = words[words.index("--since-seconds") + 1]
    assert since in ("3650d", "315360000"), error["fix"]
    assert main([*words[1:], "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["ok"] is True
