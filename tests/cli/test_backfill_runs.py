"""`mcp-jobs backfill NAME --runs` pages that backfill's ledger as list_backfills does, and its
text names the command for the older runs."""

from __future__ import annotations

import pytest

import examples.shop
from tests.cli.databases import migrated
from tests.cli.test_cli import APP, assert_tool_shape, cli, cli_json, shop
from tests.support.fix_lines import command_words

__all__ = ["shop"]  # the fixture, used by name below


def test_the_runs_of_a_backfill_page_from_the_cli(
    shop: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert examples.shop.seed_customers(20) == 15
    db = ("--database-url", migrated(shop), "--app", APP)
    code, _ = cli_json(capsys, "backfill", "normalize_emails", "--write", *db)
    assert code == 0
    cli_json(capsys, "jobs", "drain", *db)
    for _ in range(2):
        code, _ = cli_json(capsys, "backfill", "normalize_emails", "--write", "--force", *db)
        assert code == 0
        cli_json(capsys, "jobs", "drain", *db)

    runs = ("backfill", "normalize_emails", "--runs")
    code, first = cli_json(capsys, *runs, "--runs-limit", "2", *db)
    assert code == 0
    assert_tool_shape("list_backfills", first)
    assert len(first["runs"]) == 2 and first["runs_cursor"]
    assert first["backfills"][0]["last_run"]["run_id"] == first["runs"][0]["run_id"]

    code, out, _ = cli(capsys, *runs, "--runs-limit", "2", *db)
    assert code == 0 and "runs, newest first" in out
    (more,) = [line for line in out.splitlines() if line.startswith("older runs: ")]
    # The line is written to run as given (env assignments, then `mcp-jobs`, then the flags).
    code, rest = cli_json(capsys, *command_words(more.removeprefix("older runs: "))[1:], *db)
    assert code == 0 and "runs_cursor" not in rest
    assert [r["run_id"] for r in first["runs"] + rest["runs"]] == [
        r["run_id"] for r in cli_json(capsys, *runs, *db)[1]["runs"]
    ]
    assert len(rest["runs"]) == 1

    code, bad = cli_json(
        capsys, "backfill", "normalize_emails", "--runs", "--runs-cursor", "x", *db
    )
    assert code == 1 and bad["error"]["code"] == "CURSOR_INVALID"
    code, bad = cli_json(capsys, *runs, "--runs-limit", "0", *db)
    assert code == 1 and bad["error"]["details"]["argument"] == "runs_limit"
