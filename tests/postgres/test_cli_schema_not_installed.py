"""A CLI command that reads or acts on stored jobs installs no PostgreSQL schema (as it creates
no SQLite file): `jobs ls` with `?schema=` misspelt installed a whole empty schema and said
"no jobs". Refused, with the command on the schema it plainly meant, else `db migrate`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio.to_thread
import asyncpg
import pytest

from engine import connect
from engine.drivers.urls import split_schema
from engine.fix_lines import command_words
from mcp_jobs.cli import main
from tests.support.fix_lines import run_fix
from tests.support.guessed_store import assert_no_write_on_the_store_meant


async def _schemas(url: str) -> set[str]:
    conn = await asyncpg.connect(split_schema(url)[0])
    try:
        return {r[0] for r in await conn.fetch("SELECT nspname FROM pg_namespace")}
    finally:
        await conn.close()


async def test_a_misspelt_schema_is_refused_with_the_installed_one(
    pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    installed = f"{pg_url}?schema=orders_jobs"
    async with await connect(installed, migrate=True) as jobs:
        assert (await jobs.list()).jobs == []
    slipped = f"{pg_url}?schema=orders_job"
    code = await _main_off_loop(["jobs", "ls", "--database-url", slipped])
    err = capsys.readouterr().err
    assert code == 1 and "DATABASE_URL_INVALID" in err and "meant orders_jobs?" in err
    assert "orders_job" not in await _schemas(pg_url)  # nothing installed by a read
    fix = err.split("fix:", 1)[1].strip()
    words = command_words(fix)
    assert words is not None and "schema=orders_jobs" in words[-1], fix
    assert run_fix(fix).strip() == "no jobs"


async def test_a_write_on_a_misspelt_schema_gets_the_read_of_the_installed_one(
    pg_url: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """`queues pause` on `?schema=orders_job` was mended to the pause on `orders_jobs`, which
    may be another app's schema a letter away: a guessed store gets no write."""
    installed = f"{pg_url}?schema=orders_jobs"
    async with await connect(installed, migrate=True):
        pass
    slipped = f"{pg_url}?schema=orders_job"
    await assert_no_write_on_the_store_meant(installed, slipped, capsys, monkeypatch, tmp_path)
    assert "orders_job" not in await _schemas(pg_url)


async def test_a_schema_like_none_installed_is_refused_with_its_migrate(
    pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    fresh = f"{pg_url}?schema=brand_new"
    code = await _main_off_loop(["jobs", "stats", "--database-url", fresh])
    err = capsys.readouterr().err
    assert code == 1 and "no mcp-jobs schema brand_new" in err
    assert "brand_new" not in await _schemas(pg_url)
    fix = err.split("fix:", 1)[1].strip()
    assert "db migrate" in fix
    run_fix(fix)
    assert "brand_new" in await _schemas(pg_url)


async def _main_off_loop(argv: list[str]) -> int:
    """`main` runs its own event loop: from a thread, as a shell would run it."""
    return await anyio.to_thread.run_sync(main, argv)


async def test_the_check_asks_on_the_commands_own_connection(
    pg_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check is one query on the connections the command then reads through: it opened one
    of its own before each read command (a connect, and its authentication, every time). The
    command opens what the library's own read opens, and no more."""
    installed = f"{pg_url}?schema=orders_jobs"
    async with await connect(installed, migrate=True):
        pass
    opened: list[str] = []
    real = asyncpg.connect

    async def counted(*args: Any, **kwargs: Any) -> object:
        opened.append("connect")
        return await real(*args, **kwargs)

    monkeypatch.setattr(asyncpg, "connect", counted)
    async with await connect(installed, migrate=True) as jobs:
        assert (await jobs.list()).jobs == []
    by_the_library, opened[:] = len(opened), []
    code = await _main_off_loop(["jobs", "ls", "--database-url", installed])
    assert code == 0 and capsys.readouterr().out.strip() == "no jobs"
    assert by_the_library >= 1 and len(opened) == by_the_library
