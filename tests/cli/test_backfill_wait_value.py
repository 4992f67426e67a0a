"""`mcp-jobs backfill NAME --write --wait S` reads S as MCP reads `wait_seconds` (a duration
such as `30s`), and a value it cannot follow is refused before the pass is started: never a
write whose wait is silently dropped, nor an INTERNAL after the write."""

from __future__ import annotations

import pytest

import examples.shop
from tests.cli.databases import migrated
from tests.cli.test_cli import APP, cli_json, shop, words_of

__all__ = ["shop"]  # the fixture, used by name below


def _started(capsys: pytest.CaptureFixture[str], db: tuple[str, ...]) -> list[str]:
    code, listed = cli_json(capsys, "jobs", "ls", *db)
    assert code == 0, listed
    return [job["id"] for job in listed["jobs"]]


@pytest.mark.parametrize("wait", ["0s", "0m"])
def test_a_wait_written_as_a_duration_is_taken(
    shop: str, capsys: pytest.CaptureFixture[str], wait: str
) -> None:
    assert examples.shop.seed_customers(5) > 0
    db = ("--database-url", migrated(shop), "--app", APP)
    code, answer = cli_json(capsys, "backfill", "normalize_emails", "--write", "--wait", wait, *db)
    assert code == 0, answer
    assert answer["mode"] == "write" and answer["start"]["job_id"] in _started(capsys, db)


@pytest.mark.parametrize(("wait", "mended"), [("-5", "0"), ("0 seconds", "0s")])
def test_a_wait_out_of_range_or_in_words_is_mended_and_starts_nothing(
    shop: str, capsys: pytest.CaptureFixture[str], wait: str, mended: str
) -> None:
    assert examples.shop.seed_customers(5) > 0
    db = ("--database-url", migrated(shop), "--app", APP)
    code, refused = cli_json(capsys, "backfill", "normalize_emails", "--write", "--wait", wait, *db)
    assert code != 0
    error = refused["error"]
    assert error["code"] == "INVALID_ARGUMENT" and not error["retryable"], error
    assert _started(capsys, db) == []
    fix = words_of(error["fix"])
    assert fix[fix.index("--wait") + 1] == mended and "--write" in fix
    code, ran = cli_json(capsys, *fix)
    assert code == 0 and ran["mode"] == "write", ran


@pytest.mark.parametrize("wait", ["nan", "inf", "-inf", "1e999"])
def test_a_wait_that_is_no_number_of_seconds_is_refused_before_the_write(
    shop: str, capsys: pytest.CaptureFixture[str], wait: str
) -> None:
    assert examples.shop.seed_customers(5) > 0
    db = ("--database-url", migrated(shop), "--app", APP)
    code, refused = cli_json(
        capsys, "backfill", "normalize_emails", "--write", f"--wait={wait}", *db
    )
    assert code != 0
    assert refused["error"]["code"] == "INVALID_ARGUMENT", refused
    assert not refused["error"]["retryable"]
    assert _started(capsys, db) == []
