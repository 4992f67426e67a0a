"""A refused `--app` (a slip of the keys, a file's path, `module:attribute`) comes back as the
command with the module meant, and that line runs from another directory: it carries the
`PYTHONPATH` the module needs there, as every other fix naming an app from here does. Before,
the context was that of the name typed, which imports nowhere, so the fix had no PYTHONPATH
and answered APP_IMPORT_FAILED when pasted elsewhere."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.databases import migrated
from tests.cli.support import run
from tests.support.fix_lines import command_words, run_fix

MODULE = "exi_mended_app"


@pytest.mark.parametrize(
    "typed", ["exi_mended_ap", f"./{MODULE}.py", f"{MODULE}.py", f"{MODULE}:charge"]
)
def test_the_mended_app_line_runs_from_another_directory(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], typed: str
) -> None:
    (tmp_path / f"{MODULE}.py").write_text('"""An app of no jobs: importing it is the point."""\n')
    db = ("--database-url", migrated(url))
    code, refused = run(capsys, "jobs", "ls", *db, "--app", typed, "--json")
    assert code != 0
    error = refused["error"]
    assert (error["code"], error["retryable"]) == ("INVALID_ARGUMENT", False), error
    words = command_words(error["fix"])
    assert words[words.index("--app") + 1] == MODULE, error["fix"]
    assert f"PYTHONPATH={tmp_path}" in error["fix"], error["fix"]
    assert json.loads(run_fix(error["fix"]))["ok"] is True
