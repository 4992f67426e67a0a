"""`mcp-jobs db migrate` says what it applied and where the schema stands, in the words of
`db report`: a fresh file, one already at this build's version, and one a newer build migrated
(exit 0: builds of two versions run side by side in a rolling deploy, and it says so)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from engine.drivers.sqlite.migrate import migrations
from tests.cli.test_cli import cli, cli_json, shop  # noqa: F401  (the fixture)


def test_db_migrate_says_what_it_applied_and_where_the_schema_stands(
    shop: str,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    latest = migrations()[-1].version
    code, out, _ = cli(capsys, "db", "migrate", "--database-url", shop)
    assert code == 0 and out.splitlines() == [
        f"sqlite database {shop}: applied 1 to {latest}",
        f"schema: version {latest}, this package's",
    ]
    code, envelope = cli_json(capsys, "db", "migrate", "--database-url", shop)
    assert code == 0 and envelope["applied"] == []
    assert envelope["schema_line"] == f"schema: version {latest}, this package's"
    code, out, _ = cli(capsys, "db", "migrate", "--database-url", shop)
    assert code == 0 and out.splitlines() == [
        f"sqlite database {shop}: nothing to apply",
        f"schema: version {latest}, this package's",
    ]
    with sqlite3.connect(Path("jobs.db")) as db:
        db.execute(
            "INSERT INTO mcp_jobs_migrations VALUES (?, 'from_a_newer_build', 0)", (latest + 1,)
        )
    db.close()
    code, out, _ = cli(capsys, "db", "migrate", "--database-url", shop)
    assert code == 0 and out.splitlines() == [
        f"sqlite database {shop}: nothing to apply",
        f"schema: version {latest + 1}, ahead of this package's {latest} "
        "(a newer mcp-jobs migrated it: upgrade this one)",
    ]
    _, envelope = cli_json(capsys, "db", "report", "--database-url", shop)
    assert out.splitlines()[1] in envelope["lines"]
