"""`mcp-jobs db report` fails on a database it cannot use, with the error every command gets
there (its fix the report's advice) and that error's exit status (75 for a server away, which
may answer later; 1 for a URL it refuses), and still prints the report's lines: it exited 0 with
`"reachable": false`, which a script or an agent reads as healthy. A database that answers
exits 0; a SQLite file not made yet stays a report (tests/cli/test_cli.py: its `create it:` line
makes it)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

from mcp_jobs.cli import main
from mcp_jobs.cli.exit_status import TRY_AGAIN_EXIT
from tests.cli.databases import migrated
from tests.cli.support import run
from tests.conftest import PG_DSN_ENV
from tests.support.ports import free_port


def _away(kind: str) -> str:
    """A URL of `kind` where nothing listens: the connection is refused at once."""
    port = free_port()
    return {
        "postgres": f"postgresql://nobody@127.0.0.1:{port}/x",
        "redis": f"redis://127.0.0.1:{port}/0",
        "nats": f"nats://127.0.0.1:{port}/jobs",
    }[kind]


@pytest.fixture(params=["postgres", "redis", "nats"])
def away(request: pytest.FixtureRequest) -> str:
    kind: str = request.param
    if kind != "postgres":
        pytest.importorskip(kind, reason=f"the {kind} extra is not installed")
    return _away(kind)


def _pg_dsn() -> str:
    dsn = os.environ.get(PG_DSN_ENV)
    if not dsn:
        pytest.skip(f"{PG_DSN_ENV} is not set (.ci/run sets it)")
    return dsn


def _report(capsys: pytest.CaptureFixture[str], url: str) -> tuple[int, dict[str, Any]]:
    code, envelope = run(capsys, "db", "report", "--database-url", url, "--json")
    assert isinstance(envelope, dict)
    return code, envelope


def _report_text(capsys: pytest.CaptureFixture[str], url: str) -> tuple[int, str, str]:
    code = main(["db", "report", "--database-url", url])
    out, err = capsys.readouterr()
    return code, out, err


def _fix_is_the_reports_advice(envelope: dict[str, Any]) -> None:
    """The error's fix is what the report says to do, not `db report` again (which was the
    engine's fix, and run here would answer the same error with the same fix, a loop)."""
    fix = envelope["error"]["fix"]
    assert fix == "; ".join(envelope["lines"][1:]) and "db report" not in fix, envelope


def test_a_server_that_does_not_answer_exits_75_with_driver_unavailable_and_the_report(
    away: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, envelope = _report(capsys, away)
    assert (code, envelope["ok"]) == (TRY_AGAIN_EXIT, False), envelope
    error = envelope["error"]
    assert (error["code"], error["retryable"]) == ("DRIVER_UNAVAILABLE", True), error
    # The report is still there, as it was before: a script reading `reachable` is not broken.
    assert envelope["reachable"] is False and envelope["database"] == away
    assert envelope["lines"][0].startswith("server: no answer from "), envelope["lines"]
    _fix_is_the_reports_advice(envelope)
    # Text: the report's lines on stdout as before, the error on stderr, the same exit.
    code, out, err = _report_text(capsys, away)
    assert code == TRY_AGAIN_EXIT and out.splitlines() == envelope["lines"]
    assert err.startswith("error DRIVER_UNAVAILABLE: ") and "  fix:   " in err


@pytest.mark.parametrize("part", ["user", "database"])
def test_a_url_the_server_refuses_exits_1_with_database_url_invalid_and_the_report(
    part: str, capsys: pytest.CaptureFixture[str]
) -> None:
    parts = urlsplit(_pg_dsn())
    netloc = f"nobody_{part}@{parts.hostname}:{parts.port}" if part == "user" else parts.netloc
    path = "/no_such_database_here" if part == "database" else parts.path
    refused = urlunsplit((parts.scheme, netloc, path, parts.query, ""))
    code, envelope = _report(capsys, refused)
    assert (code, envelope["ok"]) == (1, False), envelope
    error = envelope["error"]
    assert (error["code"], error["retryable"]) == ("DATABASE_URL_INVALID", False), error
    assert envelope["reachable"] is False
    assert "answered and refused the session" in envelope["lines"][0], envelope["lines"]
    _fix_is_the_reports_advice(envelope)


def test_a_file_that_is_no_database_exits_1_with_the_error_other_commands_give(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "jobs.db").write_text("not a database\n")
    code, envelope = _report(capsys, url)
    assert (code, envelope["ok"], envelope["reachable"]) == (1, False, False), envelope
    assert envelope["lines"][0].startswith("file: "), envelope["lines"]
    stats = run(capsys, "jobs", "stats", "--database-url", url, "--json")[1]
    assert envelope["error"]["code"] == stats["error"]["code"] == "DATABASE_URL_INVALID"
    assert (tmp_path / "jobs.db").read_text() == "not a database\n"  # left as it is


def test_a_database_that_answers_exits_0_with_no_error(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    for answering in (migrated(url), "memory://"):
        code, envelope = _report(capsys, answering)
        assert (code, envelope["ok"], envelope["reachable"]) == (0, True, True), envelope
        assert "error" not in envelope
        code, out, err = _report_text(capsys, answering)
        assert code == 0 and out.strip() and err == ""


def test_a_postgres_server_that_answers_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    code, envelope = _report(capsys, _pg_dsn())
    assert (code, envelope["ok"], envelope["reachable"]) == (0, True, True), envelope
