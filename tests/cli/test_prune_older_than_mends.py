"""`db prune --older-than` mended as the retention variables are: a duration in words or years
read by the one rule (engine.durations: "1 year" and "1y" are 365d, as for
MCP_JOBS_RETAIN_DONE), and a negative one, which argparse took for an unknown flag (its fix the
bare --help, without the database URL), refused with the line of the time ago plainly meant,
as a dry run. Every fix runs as given."""

from __future__ import annotations

import json

import pytest

from mcp_jobs.cli import main
from tests.cli.test_prune import seed
from tests.support.fix_lines import command_words, run_fix


def _refused(capsys: pytest.CaptureFixture[str], url: str, *argv: str) -> dict[str, str]:
    seed(url)
    code = main(["db", "prune", "--database-url", url, *argv, "--json"])
    error: dict[str, str] = json.loads(capsys.readouterr().out)["error"]
    assert (code, error["code"]) == (1, "INVALID_ARGUMENT"), error
    return error


@pytest.mark.parametrize("typed", ["1 year", "1y", "1 yr"])
@pytest.mark.parametrize("dry_run", [True, False])
def test_a_year_is_mended_as_365_days(
    url: str, capsys: pytest.CaptureFixture[str], typed: str, dry_run: bool
) -> None:
    given = ["--dry-run"] if dry_run else []
    error = _refused(capsys, url, *given, "--older-than", typed)
    words = command_words(error["fix"])
    assert words[words.index("--older-than") + 1] == "365d", error
    assert ("--dry-run" in words) is dry_run and "--database-url" in words, error
    assert json.loads(run_fix(error["fix"] + " --json"))["ok"] is True


@pytest.mark.parametrize(
    ("typed", "meant"), [("-5d", "5d"), ("-1y", "365d"), ("-2 weeks", "2w"), ("-5", "5d")]
)
def test_a_negative_duration_is_refused_with_the_dry_run_of_the_time_meant(
    url: str, capsys: pytest.CaptureFixture[str], typed: str, meant: str
) -> None:
    error = _refused(capsys, url, "--older-than", typed)
    assert "negative" in error["cause"], error
    words = command_words(error["fix"])
    assert words[words.index("--older-than") + 1] == meant, error
    assert "--dry-run" in words and "--database-url" in words, error
    assert json.loads(run_fix(error["fix"] + " --json"))["mode"] == "dry_run"
