"""A worker stopped twice while its Redis server is away ends within a bound (HAND_BACK_MS on
its own clock), not when the server returns: the settle it held is let go, said in one line, and
the jobs are taken over once their leases run out (tests/support/second_stop.py). On a server
this test starts, kills and starts again itself, with an AOF so that the jobs survive."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from tests.postgres.waiting import CountingClock
from tests.redis.server import own_server
from tests.support.second_stop import Outage, stopped_twice_in_an_outage

pytest.importorskip("redis", reason="the redis extra is not installed")

from engine import ManualClock
from engine.drivers.redis import RedisDriver

pytestmark = pytest.mark.slow


async def test_a_worker_stopped_twice_in_an_outage_ends_within_its_bound_and_leases_hand_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with own_server(tmp_path, appendonly="yes", appendfsync="always") as server:
        clock = ManualClock()
        # The retry clock never moves: a held settle waits on it for good.
        driver = RedisDriver(server.url, clock=clock, retry_clock=CountingClock())
        await driver.migrate()

        async def restart() -> None:
            await anyio.to_thread.run_sync(server.start)

        outage = Outage(
            driver,
            clock,
            held=lambda: driver._holds.held,  # pyright: ignore[reportPrivateUsage]
            stop=lambda: anyio.to_thread.run_sync(server.kill),
            restart=restart,
            other=lambda: RedisDriver(server.url, clock=clock),
        )
        await stopped_twice_in_an_outage(outage, caplog)
