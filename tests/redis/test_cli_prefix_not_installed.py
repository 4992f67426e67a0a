"""A CLI read command installs no Redis store: a misspelt `?prefix=` value made one and said
"no jobs". Refused, with the command on the installed prefix it plainly meant."""

from __future__ import annotations

from pathlib import Path

import anyio.to_thread
import pytest

from engine import connect
from engine.drivers.urls import split_param
from engine.fix_lines import command_words
from mcp_jobs.cli import main
from tests.support.guessed_store import assert_no_write_on_the_store_meant


async def test_a_misspelt_prefix_is_refused_with_the_installed_one(
    database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    base, prefix = split_param(database_url, "prefix")
    assert prefix is not None
    async with await connect(database_url, migrate=True):
        pass
    slipped = f"{base}?prefix={prefix[:-2]}x:"
    code = await anyio.to_thread.run_sync(main, ["jobs", "ls", "--database-url", slipped])
    err = capsys.readouterr().err
    assert code == 1 and "DATABASE_URL_INVALID" in err and f"meant {prefix}?" in err
    words = command_words(err.split("fix:", 1)[1].strip())
    assert words is not None and words[-1].endswith(f"prefix={prefix}")
    from redis.asyncio import Redis

    client = Redis.from_url(base)
    try:
        assert [k async for k in client.scan_iter(match=f"{prefix[:-2]}x:*")] == []
    finally:
        await client.aclose()


async def test_a_write_on_a_misspelt_prefix_gets_the_read_of_the_installed_one(
    database_url: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """`jobs enqueue` on `?prefix=exY:` was mended to the enqueue on `exZ:`, which may be a
    sibling app's prefix (app1:, app2:): a guessed store gets no write."""
    base, prefix = split_param(database_url, "prefix")
    assert prefix is not None
    async with await connect(database_url, migrate=True):
        pass
    slipped = f"{base}?prefix={prefix[:-2]}x:"
    await assert_no_write_on_the_store_meant(database_url, slipped, capsys, monkeypatch, tmp_path)
