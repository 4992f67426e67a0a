"""A CLI read command installs no NATS bucket: a misspelt bucket was made and said "no jobs".
Refused, with the command on the installed bucket it plainly meant."""

from __future__ import annotations

from pathlib import Path

import anyio.to_thread
import pytest

from engine import connect
from engine.fix_lines import command_words
from mcp_jobs.cli import main
from tests.support.guessed_store import assert_no_write_on_the_store_meant


async def test_a_misspelt_bucket_is_refused_with_the_installed_one(
    database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    async with await connect(database_url, migrate=True):
        pass
    base, _, bucket = database_url.rpartition("/")
    slipped = f"{base}/{bucket[:-1]}"
    code = await anyio.to_thread.run_sync(main, ["jobs", "ls", "--database-url", slipped])
    err = capsys.readouterr().err
    assert code == 1 and "DATABASE_URL_INVALID" in err and f"meant {bucket}?" in err
    words = command_words(err.split("fix:", 1)[1].strip())
    assert words is not None and words[-1] == database_url


async def test_a_write_on_a_misspelt_bucket_gets_the_read_of_the_installed_one(
    database_url: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """`jobs enqueue` on bucket `exZ_buckt` was mended to the enqueue on `exZ_bucket`, which may
    be another app's bucket a letter away: a guessed store gets no write."""
    async with await connect(database_url, migrate=True):
        pass
    base, _, bucket = database_url.rpartition("/")
    slipped = f"{base}/{bucket[:-1]}"
    await assert_no_write_on_the_store_meant(database_url, slipped, capsys, monkeypatch, tmp_path)


async def test_db_migrate_says_it_installed_the_bucket(
    database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # exploreS: a fresh bucket made by `db migrate` was said to be "up to date".
    bucket = database_url.rpartition("/")[2]
    migrate = ["db", "migrate", "--database-url", database_url]
    assert await anyio.to_thread.run_sync(main, migrate) == 0
    assert capsys.readouterr().out.strip().endswith(f": installed bucket {bucket}")
    assert await anyio.to_thread.run_sync(main, migrate) == 0
    assert capsys.readouterr().out.strip().endswith(" is up to date")
