"""A Redis with no persistence restarted under a live worker comes back empty. The worker said
the store "appears to have been reset" and wrote on (its cron fired jobs into it), but never put
the version key back: every CLI command refused the prefix as not installed, and `db report` said
"no jobs stored yet" of a database holding jobs. The beat that sees the reset now installs the
prefix again, as `db migrate` does; until then `db report` says what happened."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import cast

import anyio.to_thread
import pytest

from engine import ManualClock
from engine.drivers import open_driver
from engine.drivers.base import REPORT, require
from engine.testing.requests import numbered as request
from mcp_jobs.cli import main
from schemas.stats import WorkerInfo
from tests.redis.server import own_server
from tests.support.fix_lines import the_line

pytest.importorskip("redis", reason="the redis extra is not installed")

from engine.drivers.redis import RedisDriver

RESET = "appears to have been reset"


def _info(now: int) -> WorkerInfo:
    return WorkerInfo(
        id="w1", hostname="h", pid=1, queues=None, concurrency=1, started_at=now, last_seen_at=now
    )


async def _cli(*args: str) -> int:
    return await anyio.to_thread.run_sync(main, list(args))


@pytest.mark.slow
async def test_the_beat_that_sees_a_reset_installs_the_prefix_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    clock = ManualClock()
    with own_server(tmp_path) as server:  # appendonly no, no save points
        driver = cast(RedisDriver, open_driver(server.url, clock=clock))
        try:
            await driver.migrate()
            await driver.enqueue([request(1, clock.now_ms())])
            await driver.worker_seen(_info(clock.now_ms()))

            server.kill()  # a restart without persistence: the server comes back empty
            server.start()
            # What the worker's cron did meanwhile: written with no version key there.
            (written,) = await driver.enqueue([request(2, clock.now_ms())])
            capsys.readouterr()

            # Before the worker's next beat: the CLI refuses, and `db report` says why.
            assert await _cli("jobs", "ls", "--database-url", server.url) == 1
            assert "DATABASE_URL_INVALID" in capsys.readouterr().err
            lines = (await require(driver, REPORT).server_report()).lines
            line = the_line(lines, 'prefix "mcp-jobs:": ')
            assert "keys stored but no version key" in line and RESET in line
            assert line.endswith(f"mcp-jobs db migrate --database-url {server.url}")

            with caplog.at_level(logging.ERROR, logger="mcp_jobs.redis"):
                await driver.worker_seen(_info(clock.now_ms()))
            (error,) = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
            assert RESET in error and "installed the prefix again" in error

            # No `db migrate`: the CLI reads the store, the job written since the reset in it.
            assert await _cli("jobs", "ls", "--database-url", server.url) == 0
            out = capsys.readouterr().out
            assert written.id in out
            lines = (await require(driver, REPORT).server_report()).lines
            assert the_line(lines, 'prefix "mcp-jobs:": ').endswith("version 1, this package's")
            assert await _cli("db", "migrate", "--database-url", server.url) == 0
            assert capsys.readouterr().out.splitlines()[0].endswith(": nothing to apply")
        finally:
            await driver.close()


async def test_db_migrate_says_it_installed_a_fresh_prefix(
    database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    prefix = database_url.rpartition("prefix=")[2]
    line = f'prefix "{prefix}": version 1, this package\'s'
    assert await _cli("db", "migrate", "--database-url", database_url) == 0
    head, schema = capsys.readouterr().out.splitlines()
    assert head.endswith(": applied 1") and "up to date" not in head and schema == line
    assert await _cli("db", "migrate", "--database-url", database_url) == 0
    head, schema = capsys.readouterr().out.splitlines()
    assert head.endswith(": nothing to apply") and schema == line
