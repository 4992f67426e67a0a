"""`mcp-jobs backfill`: a flag given where it has no use is refused with the command without it,
MCP_JOBS_ENV holds an environment name, and the text output prints times and says what is true."""

from __future__ import annotations

import re

import pytest

import examples.shop
from tests.cli.databases import migrated
from tests.cli.test_cli import APP, cli, cli_json, shop, words_of

__all__ = ["shop"]  # the fixture, used by name below


@pytest.mark.parametrize(
    ("typed", "left"),
    [
        (["backfill", "--write"], ["backfill"]),
        (["backfill", "--pending", "--write"], ["backfill", "--pending"]),
        (["backfill", "--force"], ["backfill"]),
        (["backfill", "--runs"], ["backfill"]),
        (
            ["backfill", "normalize_emails", "--runs", "--write"],
            ["backfill", "normalize_emails", "--runs"],
        ),
        (
            ["backfill", "normalize_emails", "--runs", "--force"],
            ["backfill", "normalize_emails", "--runs"],
        ),
        (["backfill", "normalize_emails", "--pending"], ["backfill", "normalize_emails"]),
        (["backfill", "normalize_emails", "--wait", "5"], ["backfill", "normalize_emails"]),
        (["backfill", "normalize_emails", "--wait", "0"], ["backfill", "normalize_emails"]),
    ],
)
def test_a_flag_with_no_use_is_refused_with_the_command_without_it(
    shop: str, capsys: pytest.CaptureFixture[str], typed: list[str], left: list[str]
) -> None:
    assert examples.shop.seed_customers(5) > 0
    db = ("--database-url", migrated(shop), "--app", APP)
    code, refused = cli_json(capsys, *typed, *db)
    assert code != 0
    error = refused["error"]
    assert error["code"] == "INVALID_ARGUMENT" and not error["retryable"]
    fix = words_of(error["fix"])
    assert fix[: len(left)] == left and not set(fix) & (set(typed) - set(left))
    # The fix runs as given, and nothing was started by the refused line.
    code, ran = cli_json(capsys, *fix)
    assert code == 0, ran
    code, listed = cli_json(capsys, "jobs", "ls", *db)
    assert listed["jobs"] == []


def test_a_forced_dry_run_is_a_rehearsal_of_the_forced_write(
    shop: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert examples.shop.seed_customers(5) > 0
    db = ("--database-url", migrated(shop), "--app", APP)
    assert cli_json(capsys, "backfill", "normalize_emails", "--write", *db)[0] == 0
    cli_json(capsys, "jobs", "drain", *db)
    code, out, _ = cli(capsys, "backfill", "normalize_emails", "--force", *db)
    assert code == 0
    (line,) = [w for w in out.splitlines() if "to run it:" in w]
    assert "--write" in line and "--force" in line  # the line it rehearses, which runs


def test_runs_print_times_and_a_write_says_when_its_ledger_run_appears(
    shop: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert examples.shop.seed_customers(5) > 0
    db = ("--database-url", migrated(shop), "--app", APP)
    code, out, _ = cli(capsys, "backfill", "normalize_emails", "--write", "--wait", "0", *db)
    assert code == 0
    # No worker has started the pass, so its ledger run is not listed yet: the text says so.
    code, runs = cli_json(capsys, "backfill", "normalize_emails", "--runs", *db)
    assert runs["runs"] == []
    assert "ledger run" not in out or "once a worker starts" in out

    cli_json(capsys, "jobs", "drain", *db)
    code, out, _ = cli(capsys, "backfill", "normalize_emails", "--runs", *db)
    assert code == 0
    ledger = out.split("runs, newest first", 1)[1]
    (row,) = [w for w in ledger.splitlines() if " completed " in w]
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", row)
    assert not re.search(r"\b\d{13}\b", row)  # not epoch milliseconds


@pytest.mark.parametrize("value", ["", " ", "prod uction"])
def test_an_environment_variable_that_is_no_name_is_refused_before_anything_runs(
    shop: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    assert examples.shop.seed_customers(5) > 0
    monkeypatch.setenv("MCP_JOBS_ENV", value)
    db = ("--database-url", shop, "--app", APP)
    code, refused = cli_json(capsys, "backfill", "normalize_emails", *db)
    assert code != 0
    assert refused["error"]["code"] == "INVALID_ARGUMENT"
    assert refused["error"]["details"]["argument"] == "MCP_JOBS_ENV"
    assert refused["error"]["fix"].startswith(("unset MCP_JOBS_ENV", "export MCP_JOBS_ENV="))
