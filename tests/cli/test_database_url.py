"""A malformed `--database-url` prints the typed error (no traceback) and exits non-zero."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from mcp_jobs.cli import main
from tests.cli.databases import migrated
from tests.cli.support import run
from tests.support.fix_lines import command_words, run_fix


@pytest.mark.parametrize(
    "url", ["postgresql://u:s3cretpw@h:notaport/x", "postgresql://u:s3cretpw%zz@h/x"]
)
def test_a_malformed_database_url_prints_database_url_invalid_and_exits_non_zero(
    url: str, capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for name in ("MCP_JOBS_DATABASE_URL", "MCP_JOBS_APP"):
        monkeypatch.delenv(name, raising=False)
    code = main(["jobs", "ls", "--database-url", url, "--json"])
    out, err = capsys.readouterr()
    envelope = json.loads(out)
    assert code != 0 and envelope["ok"] is False
    assert envelope["error"]["code"] == "DATABASE_URL_INVALID"
    assert "Traceback" not in err
    assert "s3cretpw" not in out + err


@pytest.mark.parametrize("given", ["mysql://x/y", "sqlite://", "redis://", "memory"])
def test_a_flag_url_no_driver_can_use_is_fixed_by_the_same_command_on_a_file_it_opens(
    given: str, url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The fix was `export MCP_JOBS_DATABASE_URL=sqlite:///.mcp-jobs/jobs.db`: the flag outranks
    the variable, so the same command failed the same way, and the URL was relative."""
    code, envelope = run(capsys, "jobs", "ls", "--database-url", given, "--json")
    assert code == 1 and envelope["error"]["code"] == "DATABASE_URL_INVALID"
    assert envelope["error"]["retryable"] is False
    fix = envelope["error"]["fix"]
    assert command_words(fix)[:3] == ["mcp-jobs", "jobs", "ls"], fix
    ran = json.loads(run_fix(fix))  # from another directory
    assert ran["ok"] is True, ran
    assert (tmp_path / ".mcp-jobs" / "jobs.db").is_file()


def test_a_variable_url_no_driver_can_use_is_fixed_by_exporting_a_file_it_opens(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MCP_JOBS_DATABASE_URL", "mysql://x/y")
    code, envelope = run(capsys, "jobs", "ls", "--json")
    assert code == 1 and envelope["error"]["code"] == "DATABASE_URL_INVALID"
    fix = envelope["error"]["fix"]
    assert fix.startswith("export MCP_JOBS_DATABASE_URL="), fix
    ran = json.loads(run_fix(f"{fix} && mcp-jobs jobs ls --json"))  # from another directory
    assert ran["ok"] is True, ran
    assert (tmp_path / ".mcp-jobs" / "jobs.db").is_file()


def test_nats_report_on_another_database_is_fixed_by_a_nats_url(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, envelope = run(capsys, "db", "nats-report", "--database-url", url, "--json")
    assert code == 1 and envelope["error"]["code"] == "DATABASE_URL_INVALID"
    words = command_words(envelope["error"]["fix"])
    assert words[:3] == ["mcp-jobs", "db", "nats-report"], words
    assert words[words.index("--database-url") + 1].startswith("nats://"), words


@pytest.mark.parametrize("tail", ["?mode=ro&cache=shared", "#frag"])
def test_a_sqlite_url_with_a_query_or_fragment_is_refused_and_creates_nothing(
    tail: str, url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The query or fragment was read as part of the file name: `q.db?mode=ro&cache=shared`."""
    (tmp_path / "probe").mkdir()
    given = f"sqlite:///{tmp_path}/probe/q.db{tail}"
    code, envelope = run(capsys, "jobs", "ls", "--database-url", given, "--json")
    assert code == 1 and envelope["error"]["code"] == "DATABASE_URL_INVALID"
    assert ('"mode"' if tail.startswith("?") else "#") in envelope["error"]["cause"]
    assert os.listdir(tmp_path / "probe") == []


def test_a_file_that_is_not_sqlite_is_refused_untouched_with_a_fix_that_runs(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It was STORE_DAMAGED, and its fix (SQLite's integrity check) ended in a traceback."""
    (tmp_path / "probe").mkdir()
    text = tmp_path / "probe" / "notdb.txt"
    text.write_text("hello\n")
    given = f"sqlite:///{text}"
    code, envelope = run(capsys, "jobs", "ls", "--database-url", given, "--json")
    error = envelope["error"]
    assert code == 1 and (error["code"], error["retryable"]) == ("DATABASE_URL_INVALID", False)
    assert "not an SQLite database" in error["cause"]
    assert json.loads(run_fix(error["fix"]))["ok"] is True
    assert text.read_text() == "hello\n" and os.listdir(tmp_path / "probe") == ["notdb.txt"]


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_a_path_that_is_no_regular_file_is_refused_before_sqlite_opens_it(
    kind: str, url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """/dev/null was DRIVER_UNAVAILABLE (retryable) with `df -h /dev` as the fix, /dev/full
    STORAGE_FULL, and SQLite wrote /dev/null-journal beside them."""
    if kind == "fifo":
        path = tmp_path / "probe" / "fifo"
        path.parent.mkdir()
        os.mkfifo(path)
    else:
        path = Path("/dev/null")
    code, envelope = run(capsys, "jobs", "ls", "--database-url", f"sqlite:///{path}", "--json")
    error = envelope["error"]
    assert code == 1 and (error["code"], error["retryable"]) == ("DATABASE_URL_INVALID", False)
    assert "not a regular file" in error["cause"]
    assert not any(os.path.lexists(f"{path}-{end}") for end in ("journal", "wal", "shm"))
    assert json.loads(run_fix(error["fix"]))["ok"] is True


def test_a_default_file_that_is_not_sqlite_is_fixed_by_exporting_a_file_beside_it(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No flag, no variable: the URL is the default, so naming the default again would fail."""
    default = tmp_path / ".mcp-jobs" / "jobs.db"
    default.parent.mkdir()
    default.write_text("hello\n")
    code, envelope = run(capsys, "jobs", "ls", "--json")
    error = envelope["error"]
    assert code == 1 and (error["code"], error["retryable"]) == ("DATABASE_URL_INVALID", False)
    assert error["fix"].startswith("export MCP_JOBS_DATABASE_URL="), error
    assert json.loads(run_fix(f"{error['fix']} && mcp-jobs jobs ls --json"))["ok"] is True
    assert default.read_text() == "hello\n"


@pytest.mark.parametrize(
    ("given", "meant"),
    [
        ("sqlite:relative.db", "sqlite:///{cwd}/relative.db"),
        ("sqlite:///{cwd}/q.db?mode=ro&cache=shared", "sqlite:///{cwd}/q.db"),
        ("sqlite:///{cwd}/q.db#frag", "sqlite:///{cwd}/q.db"),
        ("sqllite:///{cwd}/r.db", "sqlite:///{cwd}/r.db"),
        ("postgress://app@db.example:5432/jobs", "postgres://app@db.example:5432/jobs"),
    ],
)
def test_a_url_that_plainly_stands_for_another_is_fixed_by_that_one(
    given: str, meant: str, url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A misspelt scheme, `sqlite:` without its slashes, an option the sqlite driver does not
    take: the fix is the URL meant, not a database elsewhere."""
    given, meant = given.format(cwd=tmp_path), meant.format(cwd=tmp_path)
    code, envelope = run(capsys, "jobs", "ls", "--database-url", given, "--json")
    assert code == 1 and envelope["error"]["code"] == "DATABASE_URL_INVALID"
    words = command_words(envelope["error"]["fix"])
    assert words[words.index("--database-url") + 1] == meant, words
    if meant.startswith("sqlite"):
        migrated(meant)  # `jobs ls` reads the database meant; it creates none (database_file.py)
        assert json.loads(run_fix(envelope["error"]["fix"]))["ok"] is True
