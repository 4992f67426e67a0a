"""Database URLs a careless operator types: each is DATABASE_URL_INVALID with a fix that runs
and opens the database meant, never a traceback, never the default database in its place."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.databases import migrated
from tests.cli.support import run
from tests.support.fix_lines import command_words, run_fix


@pytest.mark.parametrize("command", [("jobs", "ls"), ("db", "report")])
def test_a_redis_url_option_is_named_and_the_fix_drops_only_it(
    command: tuple[str, ...], url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """It was INTERNAL with redis-py's TypeError as a traceback on stderr; `db report`, the fix
    of every Redis refusal, failed the same way."""
    given = "redis://127.0.0.1:1/3?foo=bar&prefix=app"
    code, envelope = run(capsys, *command, "--database-url", given, "--json")
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err
    error = envelope["error"]
    assert (error["code"], error["retryable"]) == ("DATABASE_URL_INVALID", False), error
    assert '"foo"' in error["cause"]
    words = command_words(error["fix"])
    assert words[: 1 + len(command)] == ["mcp-jobs", *command], error["fix"]
    assert words[words.index("--database-url") + 1] == "redis://127.0.0.1:1/3?prefix=app"


def test_an_empty_database_url_variable_is_refused_not_read_as_the_default_database(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`export MCP_JOBS_DATABASE_URL="$PROD_URL"`, PROD_URL unset: every command answered from
    a new, empty ./.mcp-jobs/jobs.db ("no jobs", exit 0) as `--database-url ""` is refused."""
    monkeypatch.setenv("MCP_JOBS_DATABASE_URL", "")
    code, envelope = run(capsys, "jobs", "ls", "--json")
    assert code == 1 and envelope["error"]["code"] == "DATABASE_URL_INVALID"
    assert envelope["error"]["fix"] == "unset MCP_JOBS_DATABASE_URL"
    assert not (tmp_path / ".mcp-jobs").exists()
    migrated(url)
    code, listed = run(capsys, "jobs", "ls", "--json", "--database-url", url)
    assert code == 0 and listed["ok"] is True  # the flag wins over the empty variable


@pytest.mark.parametrize("relative", [False, True])
def test_a_bare_path_to_a_sqlite_file_is_fixed_by_the_command_on_that_file(
    relative: bool, url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--database-url /path/jobs.db` (no scheme): the fix named the default database, a new
    empty file that answered "no jobs" and hid the jobs in the one meant."""
    migrated(url)
    path = tmp_path / "jobs.db"
    given = "jobs.db" if relative else str(path)
    code, envelope = run(capsys, "jobs", "ls", "--database-url", given, "--json")
    assert code == 1 and envelope["error"]["code"] == "DATABASE_URL_INVALID"
    fix = envelope["error"]["fix"]
    words = command_words(fix)
    assert words[words.index("--database-url") + 1] == f"sqlite:///{path}", fix
    assert json.loads(run_fix(fix))["ok"] is True  # from another directory
    assert not (tmp_path / ".mcp-jobs").exists()
