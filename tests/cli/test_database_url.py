"""A malformed `--database-url` prints the typed error (no traceback) and exits non-zero."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mcp_jobs.cli import main


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
