"""The CLI's `*-seconds` flags read a duration's text ("7d") as MCP's `*_seconds` arguments do,
a refused value is echoed as typed, and a duration `db prune` cannot read names the units."""

from __future__ import annotations

import pytest

from mcp_jobs.cli import main
from mcp_jobs.cli.parser import UsageError, build_parser
from mcp_jobs.config import Settings
from mcp_jobs.server.confirm_settings import confirm_settings
from tests.cli.databases import migrated
from tests.cli.support import run
from tests.support.fix_lines import command_words


def test_since_seconds_reads_a_duration(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    migrated(url)
    parsed = build_parser().parse_args(["jobs", "retry-all", "--since-seconds", "7d"])
    assert parsed.since_seconds == 604800 and isinstance(parsed.since_seconds, int)
    code, out = run(
        capsys, "jobs", "retry-all", "--since-seconds", "7d", "--database-url", url, "--json"
    )
    assert code == 0 and out["ok"], out
    for each in ("cancel-all", "retry-all"):
        assert (
            build_parser().parse_args(["jobs", each, "--since-seconds", "90"]).since_seconds == 90
        )
    # Not a whole number of seconds, or no duration: refused by the parser, as before.
    for text in ("1500ms", "7 days"):
        with pytest.raises(UsageError):
            build_parser().parse_args(["jobs", "retry-all", "--since-seconds", text])


def test_the_servers_seconds_flags_read_a_duration() -> None:
    parsed = build_parser().parse_args(["serve", "--session-idle-seconds", "30m"])
    assert parsed.session_idle_seconds == 1800
    parsed = build_parser().parse_args(["serve", "--confirm-ttl-seconds", "10m"])
    assert confirm_settings(Settings(), None, parsed.confirm_ttl_seconds).confirm_ttl_seconds == 600


def test_a_refused_confirm_ttl_is_echoed_as_typed_and_mended(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    for typed in ("99999999999", "2d"):
        code = main(["serve", "--confirm-ttl-seconds", typed, "--database-url", url])
        err = capsys.readouterr().err
        assert code == 1 and "CONFIRM_SETTING_INVALID" in err
        assert f"--confirm-ttl-seconds={typed!r}" in err and "e+" not in err
        (fix,) = [line for line in err.splitlines() if line.startswith("  fix:")]
        words = command_words(fix.removeprefix("  fix:").strip())
        assert build_parser().parse_args(words[1:]).confirm_ttl_seconds == "86400"


def test_a_duration_prune_cannot_read_names_the_units(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    migrated(url)
    for typed in ("7days", "1h30m", "P1D", "1y"):
        code, out = run(
            capsys,
            "db",
            "prune",
            "--dry-run",
            "--older-than",
            typed,
            "--database-url",
            url,
            "--json",
        )
        cause = out["error"]["cause"]
        assert code == 1 and out["error"]["code"] == "INVALID_ARGUMENT"
        assert "ms, s, m, h, d or w" in cause, cause
