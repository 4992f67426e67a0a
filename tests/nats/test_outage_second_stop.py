"""A worker stopped twice while its NATS server is away ends within a bound (HAND_BACK_MS on its
own clock), not when the server returns: the settle it held is let go, said in one line, and the
jobs are taken over once their leases run out (tests/support/second_stop.py). On a server this
test starts, kills and starts again itself (skipped, with the reason, without nats-server).
The close that follows, with the server still away, closes: nats-py's own close fails there."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from engine import ManualClock
from engine.driver_errors import DriverUnavailableError
from engine.testing.requests import numbered as request
from tests.nats.server import NatsServer, binary_or_skip
from tests.postgres.waiting import CountingClock
from tests.support.second_stop import Outage, stopped_twice_in_an_outage

pytest.importorskip("nats", reason="the nats extra is not installed")

from engine.drivers.nats import NatsDriver

pytestmark = pytest.mark.slow


async def test_a_worker_stopped_twice_in_an_outage_ends_within_its_bound_and_leases_hand_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    server = NatsServer(binary_or_skip(), tmp_path / "store", name="second-stop")
    server.start()
    try:
        clock = ManualClock()
        url = f"{server.url}/outage"
        # The retry clock never moves: a held settle waits on it for good.
        driver = NatsDriver(url, clock=clock, connect_timeout_s=1.0, retry_clock=CountingClock())
        await driver.migrate()

        async def restart() -> None:
            await anyio.to_thread.run_sync(server.start)

        outage = Outage(
            driver,
            clock,
            held=lambda: driver._holds.held,  # pyright: ignore[reportPrivateUsage]
            stop=lambda: anyio.to_thread.run_sync(server.kill),
            restart=restart,
            other=lambda: NatsDriver(url, clock=clock, connect_timeout_s=1.0),
        )
        await stopped_twice_in_an_outage(outage, caplog)
    finally:
        server.stop()


async def test_a_driver_closed_while_its_server_is_away_closes_without_an_error(
    tmp_path: Path,
) -> None:
    server = NatsServer(binary_or_skip(), tmp_path / "store", name="closed-away")
    server.start()
    try:
        driver = NatsDriver(f"{server.url}/outage", clock=ManualClock(), connect_timeout_s=0.5)
        await driver.migrate()
        server.kill()
        # Writes the client buffers for the server while it is away: nats-py's close wrote
        # them into the lost connection and failed (DRIVER_UNAVAILABLE) before it closed.
        for n in range(3):
            with anyio.fail_after(30), pytest.raises(DriverUnavailableError):
                await driver.enqueue([request(n, 0)])
        with anyio.fail_after(30):
            await driver.close()
    finally:
        server.stop()
