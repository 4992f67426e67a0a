"""A diagnosis run without --app says the module that declares the jobs is unknown, and where to
put it. At the terminal there is no server: the words must fit the face that ran it (they said
"this server was started without --app" to a person who typed a command)."""

from __future__ import annotations

import pytest

from tests.cli.support import run, stored_job


def test_the_terminal_is_not_told_of_a_server(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    stored_job(url, "note", "notes")
    code, diagnosis = run(capsys, "jobs", "diagnose", "--json", "--database-url", url)
    assert code == 0
    (waiting,) = [f for f in diagnosis["findings"] if f["code"] == "NO_LIVE_WORKERS"]
    assert "<module>" in waiting["fix"], waiting
    assert "no --app was given" in waiting["cause"], waiting
    assert "server" not in waiting["cause"], waiting
