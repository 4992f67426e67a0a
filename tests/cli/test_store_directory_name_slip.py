"""A reader pointed at `.mcp-jobs/job.db` beside the `.mcp-jobs/jobs.db` it plainly meant is
refused with the command on that file, and creates none: before, any name under `.mcp-jobs/`
was created, so a slip of the keys there answered "no jobs", exit 0, from a new empty database
left behind. A name there that stands for no database beside it is still created on first use."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mcp_jobs.cli import main
from tests.cli.support import run
from tests.support.fix_lines import command_words, run_fix


def test_a_slip_in_a_name_under_the_store_directory_is_refused_with_the_file_meant(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / ".mcp-jobs"
    assert main(["db", "migrate", "--database-url", "sqlite:///.mcp-jobs/jobs.db"]) == 0
    capsys.readouterr()
    code, envelope = run(
        capsys, "jobs", "ls", "--database-url", "sqlite:///.mcp-jobs/job.db", "--json"
    )
    assert code == 1, envelope
    error = envelope["error"]
    assert (error["code"], error["retryable"]) == ("DATABASE_URL_INVALID", False), error
    assert str(store / "jobs.db") in error["cause"], error
    assert sorted(p.name for p in store.iterdir()) == ["jobs.db"]
    words = command_words(error["fix"])
    assert words[1:3] == ["jobs", "ls"], error
    assert words[words.index("--database-url") + 1] == f"sqlite:///{store / 'jobs.db'}", error
    assert json.loads(run_fix(error["fix"]))["ok"] is True


def test_a_name_under_the_store_directory_like_no_database_there_is_still_created(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["db", "migrate", "--database-url", "sqlite:///.mcp-jobs/jobs.db"]) == 0
    capsys.readouterr()
    code, envelope = run(
        capsys, "jobs", "ls", "--database-url", "sqlite:///.mcp-jobs/staging.db", "--json"
    )
    assert code == 0 and envelope["jobs"] == [], envelope
    assert (tmp_path / ".mcp-jobs" / "staging.db").is_file()
