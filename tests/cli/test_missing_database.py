"""A command that reads or acts on stored jobs, pointed at a SQLite file that is not there, is
refused (DATABASE_URL_INVALID naming the path) and creates nothing: before, it made a new empty
database, answered "no jobs" with exit 0 and left the file behind. Its fix runs: the command on
the file plainly meant, else the `db migrate` that creates this one. The commands that start
something on purpose still create it, as the default `./.mcp-jobs/jobs.db` is on first use."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mcp_jobs.cli import main
from tests.cli.support import run
from tests.support.fix_lines import command_words, run_fix

READERS = [
    ["jobs", "ls"],
    ["jobs", "show", "01abc"],
    ["jobs", "stats"],
    ["jobs", "diagnose"],
    ["jobs", "describe"],
    ["jobs", "retry-all"],
    ["jobs", "cancel", "01abc"],
    ["queues", "ls"],
    ["queues", "pause", "mail"],
    ["limits"],
    ["backfill"],
    ["events", "send", "paid", "7"],
    ["db", "prune", "--dry-run"],
]


def _refused(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    code, envelope = run(capsys, *argv, "--json")
    assert code == 1, envelope
    error: dict[str, Any] = envelope["error"]
    assert (error["code"], error["retryable"]) == ("DATABASE_URL_INVALID", False), error
    return error


@pytest.mark.parametrize("command", READERS)
def test_a_reader_pointed_at_no_file_is_refused_and_creates_none(
    command: list[str], url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    error = _refused(capsys, *command, "--database-url", "sqlite:///adir")
    assert f"no database at {tmp_path / 'adir'}" in error["cause"], error
    assert sorted(os.listdir(tmp_path)) == []  # no file, no .mcp-jobs either
    # The fix creates it where the URL meant, from any directory; then the command answers.
    words = command_words(error["fix"])
    assert words[1:3] == ["db", "migrate"], error["fix"]
    run_fix(error["fix"])
    assert (tmp_path / "adir").is_file()
    code, after = run(capsys, *command, "--database-url", "sqlite:///adir", "--json")
    # A job id that names nothing here is refused as such (JOB_NOT_FOUND): the database is there.
    assert code == 0 or after["error"]["code"] != "DATABASE_URL_INVALID", after


def test_the_file_plainly_meant_is_the_fix(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A slip of the keys in the file's name, or the name without the `.mcp-jobs/` it lives in."""
    assert main(["db", "migrate", "--database-url", url]) == 0  # tmp_path/jobs.db
    store = tmp_path / "proj" / ".mcp-jobs"
    store.mkdir(parents=True)
    assert main(["db", "migrate", "--database-url", f"sqlite:///{store / 'jobs.db'}"]) == 0
    capsys.readouterr()
    for typed, meant in [
        (f"sqlite:///{tmp_path / 'jbos.db'}", tmp_path / "jobs.db"),
        ("sqlite:///proj/jobs.db", store / "jobs.db"),
    ]:
        error = _refused(capsys, "jobs", "ls", "--database-url", typed)
        assert str(meant) in error["cause"]
        words = command_words(error["fix"])
        assert words[1:3] == ["jobs", "ls"], error
        assert words[words.index("--database-url") + 1] == f"sqlite:///{meant}", error
        assert json.loads(run_fix(error["fix"]))["ok"] is True
    assert sorted(p.name for p in tmp_path.iterdir()) == ["jobs.db", "proj"]


def test_a_variable_naming_no_file_is_fixed_by_exporting_the_one_meant(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert main(["db", "migrate", "--database-url", url]) == 0
    capsys.readouterr()
    monkeypatch.setenv("MCP_JOBS_DATABASE_URL", f"sqlite:///{tmp_path / 'jbos.db'}")
    error = _refused(capsys, "jobs", "stats")
    assert error["fix"] == f"export MCP_JOBS_DATABASE_URL=sqlite:///{tmp_path / 'jobs.db'}"
    assert not (tmp_path / "jbos.db").exists()


def test_the_commands_that_start_something_still_create_it(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["db", "migrate", "--database-url", "sqlite:///made.db"]) == 0
    assert (tmp_path / "made.db").is_file()
    # A stdio server whose client has gone at once: it opened (and created) its database.
    served = subprocess.run(
        [
            str(Path(sys.executable).parent / "mcp-jobs"),
            "serve",
            "--database-url",
            "sqlite:///s.db",
        ],
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=60,
    )
    assert served.returncode == 0, served.stderr
    assert (tmp_path / "s.db").is_file()


def test_the_default_database_is_still_created_on_first_use(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, envelope = run(capsys, "jobs", "ls", "--json")
    assert code == 0 and envelope["jobs"] == []
    assert (tmp_path / ".mcp-jobs" / "jobs.db").is_file()


def test_a_url_short_of_slashes_is_mended_to_a_relative_path_not_the_root(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`sqlite:/relative.db`: its own cause says "write sqlite:///relative/jobs.db"; the fix
    named `sqlite:////relative.db`, a file at the filesystem's root."""
    code, envelope = run(capsys, "jobs", "ls", "--database-url", "sqlite:/relative.db", "--json")
    assert code == 1 and envelope["error"]["code"] == "DATABASE_URL_INVALID"
    words = command_words(envelope["error"]["fix"])
    assert words[words.index("--database-url") + 1] == f"sqlite:///{tmp_path / 'relative.db'}"
    # An absolute path whose directory is there is read as absolute.
    elsewhere = tmp_path / "data"
    elsewhere.mkdir()
    given = f"sqlite:{elsewhere / 'jobs.db'}"
    code, envelope = run(capsys, "jobs", "ls", "--database-url", given, "--json")
    words = command_words(envelope["error"]["fix"])
    assert words[words.index("--database-url") + 1] == f"sqlite:///{elsewhere / 'jobs.db'}"
