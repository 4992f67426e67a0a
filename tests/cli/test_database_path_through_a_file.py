"""A SQLite URL whose path runs through a file where it needs a directory: the command that only
reads is refused with `ls -ld` of the file in the way (the README's SQLite failures), not with a
`db migrate` fix that would fail the same way; nothing is created."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import pytest

from tests.cli.support import run


@pytest.mark.parametrize(
    "command", [["jobs", "ls"], ["queues", "ls"], ["db", "prune", "--dry-run"]]
)
def test_a_path_through_a_file_is_refused_with_what_is_in_the_way(
    command: list[str], url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "notes.txt").write_text("not a directory\n")
    through = f"sqlite:///{tmp_path / 'notes.txt' / 'jobs.db'}"
    code, envelope = run(capsys, *command, "--database-url", through, "--json")
    assert code == 1, envelope
    error = envelope["error"]
    assert (error["code"], error["retryable"]) == ("DATABASE_URL_INVALID", False), error
    assert error["fix"] == f"ls -ld {tmp_path / 'notes.txt'}", error
    assert "is a file, not a directory" in error["cause"], error
    shown = subprocess.run(shlex.split(error["fix"]), capture_output=True, text=True, check=True)
    assert shown.stdout.startswith("-")  # a regular file: what is in the way
    assert sorted(os.listdir(tmp_path)) == ["notes.txt"]


def test_the_report_of_a_path_through_a_file_fails_showing_what_is_in_the_way(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Not "create it: db migrate …", which fails the same way, and not exit 0.
    (tmp_path / "notes.txt").write_text("not a directory\n")
    through = f"sqlite:///{tmp_path / 'notes.txt' / 'jobs.db'}"
    code, envelope = run(capsys, "db", "report", "--database-url", through, "--json")
    assert code == 1 and envelope["reachable"] is False, envelope
    assert envelope["error"]["code"] == "DATABASE_URL_INVALID", envelope
    assert envelope["error"]["fix"] == f"ls -ld {tmp_path / 'notes.txt'}", envelope
    assert f"look: ls -ld {tmp_path / 'notes.txt'}" in envelope["lines"], envelope
    assert not any("db migrate" in line for line in envelope["lines"]), envelope
    assert sorted(os.listdir(tmp_path)) == ["notes.txt"]
