"""A write on a server's store that is not installed (a PostgreSQL schema, a Redis prefix, a
NATS bucket), whose URL plainly meant an installed one a letter away: the fix is the read that
shows that one (`jobs stats`), never the write on it, and run as printed it writes nothing there.
Shared by the per-server tests (tests/<server>/test_cli_*_not_installed.py)."""

from __future__ import annotations

from pathlib import Path

import anyio.to_thread
import pytest

from engine import connect
from mcp_jobs.cli import main
from tests.support.fix_lines import command_words, run_fix

RECEIPT = '{"order_id": 7, "email": "a@b.co"}'
# Writes with no plan to show, as the probe ran them: each was mended to itself on the store meant.
WRITES = (
    ("jobs", "enqueue", "send_receipt", "--input", RECEIPT, "--tenant", "acme"),
    ("queues", "pause", "mail"),
)


async def assert_no_write_on_the_store_meant(
    meant: str,
    typed: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """Each of `WRITES` on `typed` is refused naming `meant` (installed), its fix the read of
    `meant`; once every fix has run, `meant` holds no job and no pause."""
    monkeypatch.chdir(tmp_path)  # the shop app's own file, should anything make it
    monkeypatch.setenv("SHOP_DB", str(tmp_path / "shop.db"))
    for argv in WRITES:
        line = [*argv, "--app", "examples.shop", "--database-url", typed]
        code = await anyio.to_thread.run_sync(main, line)
        err = capsys.readouterr().err
        assert code == 1 and "DATABASE_URL_INVALID" in err, err
        fix = err.split("fix:", 1)[1].strip()
        words = command_words(fix)
        assert words[1:3] == ["jobs", "stats"], fix
        assert words[words.index("--database-url") + 1] == meant, fix
        await anyio.to_thread.run_sync(run_fix, fix)
    async with await connect(meant, migrate=False) as jobs:
        assert (await jobs.list()).jobs == []
        assert await jobs.pauses() == []
