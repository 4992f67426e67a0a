"""`mcp-jobs db report` on SQLite, run as the fix lines print it (tests/support/fix_lines.py): a
missing file is reported, not made, with the command that makes it; a migrated file shows its
library, journal mode, schema version and the disk's room."""

from __future__ import annotations

from pathlib import Path

from engine.drivers.sqlite.migrate import migrations
from engine.drivers.urls import report_fix
from tests.support.fix_lines import run_fix


def test_a_missing_file_is_reported_not_made_and_the_line_that_makes_it_runs(
    tmp_path: Path,
) -> None:
    path = tmp_path / "jobs.db"
    url = f"sqlite:///{path}"
    lines = run_fix(report_fix(url)).splitlines()
    assert lines[0] == f"file: none at {path}"
    # The module the command's own Python picks (engine.drivers.sqlite.library).
    assert lines[1].startswith("library: ") and " (SQLite 3." in lines[1]
    assert not path.exists()
    make = lines[2].removeprefix("create it: ")
    assert make == f"mcp-jobs db migrate --database-url {url}"
    run_fix(make)
    lines = run_fix(report_fix(url)).splitlines()
    assert lines[0].startswith(f"file: {path}, ")
    assert "journal_mode: wal" in lines
    assert f"schema: version {migrations()[-1].version}, this package's" in lines
    assert lines[-1].startswith("disk: ") and lines[-1].endswith(
        " bytes free of " + lines[-1].rpartition(" of ")[2]
    )
