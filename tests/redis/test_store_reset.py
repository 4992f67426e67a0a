"""A Redis that keeps nothing on disk comes back empty from a restart: opening such a store
warns, `db report` says so, and a worker whose held jobs vanished logs an ERROR saying the store
appears to have been reset, its refused settles saying the jobs are gone (not that a lease
expired). A job deleted under a holder by another program is told apart the same way."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import cast

import anyio
import pytest

from engine import ManualClock
from engine.drivers import open_driver
from engine.drivers.base import REPORT, AckWrite, StepWrite, require
from engine.errors import JobSlotLostError
from engine.testing.requests import numbered as request
from schemas.steps import StepRecord
from tests.redis.server import own_server
from tests.support.fix_lines import the_line
from tests.support.paced_clock import PacedClock

pytest.importorskip("redis", reason="the redis extra is not installed")

from redis.asyncio import Redis

from engine.drivers.redis import RedisDriver

LEASE_MS = 60_000
GONE = "is no longer in the store"
LEASE_CAUSE = "lease expired, job cancelled or claimed by another worker"


def _errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "mcp_jobs.redis" and r.levelno == logging.ERROR
    ]


@pytest.mark.slow
async def test_opening_a_store_that_keeps_nothing_on_disk_warns(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with own_server(tmp_path) as server:  # appendonly no, no save points
        driver = open_driver(server.url, clock=ManualClock())
        try:
            with caplog.at_level(logging.WARNING, logger="mcp_jobs.redis"):
                await driver.migrate()
            lines = (await require(driver, REPORT).server_report()).lines
        finally:
            await driver.close()
    (warning,) = [r.getMessage() for r in caplog.records if r.name == "mcp_jobs.redis"]
    assert warning.startswith("Redis keeps nothing on disk (appendonly no, no RDB save points)")
    assert "set appendonly yes" in warning
    assert "a restart of the server empties it" in the_line(lines, "persistence: ")


@pytest.mark.slow
async def test_a_store_with_aof_opens_quietly(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with own_server(tmp_path, appendonly="yes") as server:
        driver = open_driver(server.url, clock=ManualClock())
        try:
            with caplog.at_level(logging.WARNING, logger="mcp_jobs.redis"):
                await driver.migrate()
            lines = (await require(driver, REPORT).server_report()).lines
        finally:
            await driver.close()
    assert not [r for r in caplog.records if r.name == "mcp_jobs.redis"]
    assert the_line(lines, "persistence: ").startswith("persistence: appendonly yes")


@pytest.mark.slow
async def test_held_acks_met_by_a_reset_store_say_the_store_was_reset(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with own_server(tmp_path) as server:

        async def restarted() -> None:
            await anyio.to_thread.run_sync(server.start)

        clock = ManualClock()
        driver = cast(
            RedisDriver,
            open_driver(server.url, clock=clock, retry_clock=PacedClock(then=(2, restarted))),
        )
        try:
            await driver.migrate()
            await driver.enqueue([request(n, clock.now_ms()) for n in (1, 2, 3)])
            held = await driver.claim("w", 3, LEASE_MS)
            server.kill()  # and it comes back empty
            caplog.set_level(logging.INFO)
            with anyio.fail_after(30):
                outcomes = await driver.ack_many(
                    [AckWrite(c.record.id, c.token, None) for c in held]
                )
        finally:
            await driver.close()
    assert all(isinstance(o, JobSlotLostError) for o in outcomes)
    refusals = cast(list[JobSlotLostError], outcomes)
    assert all(GONE in o.cause and o.code == "JOB_SLOT_LOST" for o in refusals)
    (error,) = _errors(caplog)
    assert "appears to have been reset" in error and "version" in error
    held_lines = [r for r in caplog.records if r.name == "engine.drivers.holding"]
    assert [r.levelno for r in held_lines] == [logging.WARNING, logging.WARNING]
    ended = held_lines[1].getMessage()
    assert "written 0, refused 3 (job gone: 3)" in ended and "is written" not in ended


async def test_a_job_deleted_under_its_holder_is_gone_not_a_lost_lease(
    database_url: str, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    driver = cast(RedisDriver, open_driver(database_url, clock=clock))
    other = Redis.from_url(database_url.partition("?")[0], decode_responses=True)
    try:
        await driver.migrate()
        await driver.enqueue([request(n, clock.now_ms()) for n in (1, 2, 3, 4)])
        held = {c.record.id: c for c in await driver.claim("w", 4, LEASE_MS)}
        one, two, three, four = (held[f"{n:032x}"] for n in (1, 2, 3, 4))
        await other.delete(driver.prefix + f"job:{one.record.id}")  # another program's DEL
        caplog.set_level(logging.ERROR, logger="mcp_jobs.redis")

        with pytest.raises(JobSlotLostError) as gone:
            await driver.heartbeat(one.record.id, one.token, LEASE_MS)
        assert GONE in gone.value.cause
        (error,) = _errors(caplog)
        assert "gone from the store" in error and one.record.id in error
        assert "appears to have been reset" not in error  # its version key is still there

        # Within the quiet minute another gone job is refused the same way, without a line.
        await other.delete(driver.prefix + f"job:{two.record.id}")
        (refused,) = await driver.ack_many([AckWrite(two.record.id, two.token, None)])
        assert isinstance(refused, JobSlotLostError) and GONE in refused.cause
        step = StepRecord(
            job_id=two.record.id,
            run_id=two.record.run_id,
            name="s",
            status="completed",
            started_at=clock.now_ms(),
        )
        (refused,) = await driver.save_steps_many([StepWrite(two.record.id, two.token, step)])
        assert isinstance(refused, JobSlotLostError) and GONE in refused.cause
        assert len(_errors(caplog)) == 1

        # A lease that moved on is JOB_SLOT_LOST as before, and no ERROR.
        clock.advance(LEASE_MS + 1)
        (taken,) = await driver.claim("other", 1, LEASE_MS, None)
        moved = three if taken.record.id == three.record.id else four
        (lost,) = await driver.ack_many([AckWrite(moved.record.id, moved.token, None)])
        assert isinstance(lost, JobSlotLostError) and LEASE_CAUSE in lost.cause
        assert len(_errors(caplog)) == 1

        from engine.drivers.redis.lost import QUIET_MS

        clock.advance(QUIET_MS)
        await other.delete(driver.prefix + "version")
        await other.delete(driver.prefix + f"job:{taken.record.id}")
        with pytest.raises(JobSlotLostError):
            await driver.heartbeat(taken.record.id, taken.token, LEASE_MS)
        assert "appears to have been reset" in _errors(caplog)[1]
    finally:
        await other.aclose()
        await driver.close()
