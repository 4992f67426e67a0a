"""`--database-url` naming a PostgreSQL server with a misspelt `sslmode`: the fix is the same
command on that server with the option mended (its password left out), not the default SQLite
file, which ran and answered from an empty local database."""

from __future__ import annotations

import pytest

from tests.cli.support import run
from tests.support.fix_lines import command_words


def test_a_misspelt_sslmode_is_fixed_on_the_server_meant(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    given = "postgresql://u:s3cretpw@127.0.0.1:1/jobs?sslmode=requre"
    code, envelope = run(capsys, "jobs", "ls", "--database-url", given, "--json")
    error = envelope["error"]
    assert code == 1 and error["code"] == "DATABASE_URL_INVALID"
    assert "s3cretpw" not in str(envelope)
    words = command_words(error["fix"])
    assert words[:3] == ["mcp-jobs", "jobs", "ls"], error["fix"]
    mended = words[words.index("--database-url") + 1]
    assert mended == "postgresql://u@127.0.0.1:1/jobs?sslmode=require", error["fix"]
