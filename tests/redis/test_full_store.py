"""A Redis at `maxmemory` (policy noeviction) refuses every write, and is still a store that can
be opened, read, diagnosed and pruned: `connect()` migrates, and a store at this version is only
read. A refused write is STORAGE_FULL saying the server's memory is full (not a disk), and its fix
raises maxmemory as printed. On a server of the test's own."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from engine import ManualClock, connect
from engine.client import Jobs
from engine.driver_errors import StorageFullError
from engine.drivers import open_driver
from engine.drivers.base import REPORT, AckWrite, require
from engine.testing.requests import numbered as request
from tests.redis.server import RedisServer, own_server
from tests.support.fix_lines import run_fix, the_line

pytest.importorskip("redis", reason="the redis extra is not installed")

from redis.exceptions import OutOfMemoryError

pytestmark = pytest.mark.slow


@pytest.fixture
def full(tmp_path: Path) -> Iterator[RedisServer]:
    with own_server(tmp_path, **{"maxmemory-policy": "noeviction"}) as server:
        yield server


def _fill(server: RedisServer) -> None:
    """The server at maxmemory: its limit set below what it uses (a store filled to its limit
    is the same state, reached by whatever wrote last)."""
    client = server.client()
    try:
        used = int(client.info("memory")["used_memory"])
        client.config_set("maxmemory", str(used // 2))
        with pytest.raises(OutOfMemoryError):
            client.set("filler", "x")
    finally:
        client.close()


async def _stored(url: str, clock: ManualClock) -> tuple[str, str]:
    """Jobs in several states; the id of a done one and of a ready one."""
    jobs = await connect(url, clock=clock)
    try:
        driver = jobs.driver
        await driver.enqueue([request(n, clock.now_ms()) for n in range(1, 11)])
        claimed = await driver.claim("w", 4, 60_000)
        await driver.ack_many([AckWrite(c.record.id, c.token, {"ok": 1}) for c in claimed[:2]])
        return claimed[0].record.id, f"{10:032x}"
    finally:
        await jobs.close()


async def test_a_full_store_opens_and_reads(full: RedisServer) -> None:
    clock = ManualClock()
    done_id, ready_id = await _stored(full.url, clock)
    await anyio.to_thread.run_sync(lambda: _fill(full))
    jobs: Jobs = await connect(full.url, clock=clock)  # migrates: writes nothing here
    try:
        (stats,) = await jobs.stats()
        assert (stats.ready, stats.running, stats.done) == (6, 2, 2)
        assert len((await jobs.list(limit=50)).jobs) == 10
        assert (await jobs.get(done_id)).state == "done"
        assert (await jobs.trace(ready_id)).job.state == "ready"
        assert (await require(jobs.driver, REPORT).server_report()).reachable
    finally:
        await jobs.close()
    # The commands an operator runs on it, as printed.
    for command in ("jobs diagnose", "db prune --dry-run", "jobs stats", f"jobs show {done_id}"):
        await anyio.to_thread.run_sync(run_fix, f"mcp-jobs {command} --database-url {full.url}")


async def test_a_write_refused_at_maxmemory_says_memory_and_its_fix_raises_it(
    full: RedisServer,
) -> None:
    clock = ManualClock()
    await _stored(full.url, clock)
    await anyio.to_thread.run_sync(lambda: _fill(full))
    jobs = await connect(full.url, clock=clock)
    try:
        with pytest.raises(StorageFullError) as refused:
            await jobs.driver.enqueue([request(99, clock.now_ms())])
        error = refused.value
        assert error.code == "STORAGE_FULL" and error.retryable
        assert "memory is full" in error.cause and "maxmemory" in error.cause
        assert "disk" not in error.cause
        assert "script:" not in error.cause and "user_script" not in error.cause
        assert "mcp-jobs db prune --database-url" in error.cause
        # The fix, run as printed, raises maxmemory: the same write then lands.
        await anyio.to_thread.run_sync(lambda: run_fix(error.fix))
        (result,) = await jobs.driver.enqueue([request(99, clock.now_ms())])
        assert not result.deduped
    finally:
        await jobs.close()


async def test_db_report_on_a_full_store_says_what_to_do(full: RedisServer) -> None:
    await _stored(full.url, ManualClock())
    await anyio.to_thread.run_sync(lambda: _fill(full))
    driver = open_driver(full.url, clock=ManualClock())  # what `db report` opens: no migrate
    try:
        line = the_line((await require(driver, REPORT).server_report()).lines, "memory full: ")
        assert "Raise maxmemory to " in line
        assert f"mcp-jobs db prune --database-url {full.url}" in line
        raise_line = line.partition("restart undoes it): ")[2].partition("; or free memory")[0]
        await anyio.to_thread.run_sync(run_fix, raise_line)
        lines = (await require(driver, REPORT).server_report()).lines
        assert not [found for found in lines if found.startswith("memory full: ")]
    finally:
        await driver.close()


def test_a_scripts_sha_and_lua_line_are_left_out_of_a_cause() -> None:
    from redis.exceptions import ResponseError

    from engine.drivers.redis.connection import converted

    sha = "bc7733c8" * 5
    replies = (  # Redis 7, then Redis 6
        f"OOM command not allowed when used memory > 'maxmemory'. script: {sha}, on "
        "@user_script:44.",
        f"Error running script (call to f_{sha}): @user_script:44: WRONGTYPE Operation "
        "against a key holding the wrong kind of value",
    )
    for reply in replies:
        cause = converted(ResponseError(reply), "redis://h:6379/0", "fix").cause
        assert sha not in cause and "user_script" not in cause, cause
