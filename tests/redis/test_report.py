"""`mcp-jobs db report` on Redis, run as the fix lines print it (tests/support/fix_lines.py: no
redis-cli on the PATH): the server, its memory and eviction policy, and the prefix's version. A
server that does not answer: test_driver.py."""

from __future__ import annotations

import logging
from typing import cast

import anyio
import pytest

from engine import ManualClock
from engine.drivers import open_driver
from engine.drivers.redis import RedisDriver
from engine.drivers.redis.connection import split_prefix
from engine.drivers.redis.report import named
from engine.drivers.urls import migrate_fix, report_fix
from tests.support.fix_lines import report_lines, run_fix, the_line


async def test_a_prefix_never_migrated_says_to_migrate_and_that_runs_as_given(
    database_url: str,
) -> None:
    prefix = database_url.partition("prefix=")[2]
    lines = await report_lines(database_url)
    assert the_line(lines, "server: Redis ").endswith(", role master")
    assert the_line(lines, "clock: ").startswith(  # the server runs on this machine
        "clock: this machine's clock agrees with the database server's ("
    )
    assert the_line(lines, "memory: ")
    assert the_line(lines, "persistence: appendonly ")
    assert the_line(lines, f"{named(prefix)}: ") == (
        f"{named(prefix)}: no jobs stored yet (run {migrate_fix(database_url)})"
    )
    await anyio.to_thread.run_sync(lambda: run_fix(migrate_fix(database_url)))
    lines = await report_lines(database_url)
    assert the_line(lines, f"{named(prefix)}: ") == f"{named(prefix)}: version 1, this package's"


async def test_a_prefix_given_to_the_driver_is_the_one_its_fix_lines_name(
    database_url: str,
) -> None:
    base, prefix = split_prefix(database_url)
    assert prefix is not None
    driver = cast(RedisDriver, open_driver(base, clock=ManualClock(0), prefix=prefix))
    try:
        lines = (await driver.server_report()).lines
        line = the_line(lines, f"{named(prefix)}: ")
        fix = line.partition("(run ")[2].removesuffix(")")
        assert fix == migrate_fix(database_url)  # the URL names the prefix
        await anyio.to_thread.run_sync(lambda: run_fix(fix))
        lines = (await driver.server_report()).lines
        line = the_line(lines, f"{named(prefix)}: ")
        assert line == f"{named(prefix)}: version 1, this package's"
    finally:
        await driver.close()


async def test_an_eviction_policy_that_can_drop_jobs_is_called_out(
    database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    from redis.asyncio import Redis

    client = Redis.from_url(database_url.partition("?")[0], decode_responses=True)
    was = (await client.config_get("maxmemory-policy"))["maxmemory-policy"]
    try:
        await client.config_set("maxmemory-policy", "noeviction")
        assert the_line(await report_lines(database_url), "maxmemory-policy: ") == (
            "maxmemory-policy: noeviction"
        )
        await client.config_set("maxmemory-policy", "allkeys-lru")
        assert the_line(await report_lines(database_url), "maxmemory-policy: ") == (
            "maxmemory-policy: allkeys-lru (drops any key when memory runs short, jobs among "
            "them: set noeviction)"
        )
        # A process that opens the store says so in its log, with the fix.
        driver = open_driver(database_url, clock=ManualClock(0))
        try:
            with caplog.at_level(logging.WARNING, logger="mcp_jobs.redis"):
                await driver.migrate()
        finally:
            await driver.close()
        (warning,) = [
            r.getMessage()
            for r in caplog.records
            if r.name == "mcp_jobs.redis" and "maxmemory-policy" in r.getMessage()
        ]
        assert warning.startswith("Redis maxmemory-policy is allkeys-lru: ")
        assert "set maxmemory-policy noeviction" in warning and report_fix(database_url) in warning
        await client.config_set("maxmemory-policy", "volatile-lru")
        assert the_line(await report_lines(database_url), "maxmemory-policy: ") == (
            "maxmemory-policy: volatile-lru (drops only keys with a TTL, which no job's key has)"
        )
    finally:
        await client.config_set("maxmemory-policy", was)
        await client.aclose()
