"""A machine whose clock is set wrong, on a Redis server another machine shares: the driver
reads this machine's clock as the server reads its own (`TIME`), so a lease held on either is not
over on the other (a fast clock took them over, and the job ran twice)."""

from __future__ import annotations

from typing import cast

import pytest

from engine.drivers import open_driver

pytest.importorskip("redis", reason="the redis extra is not installed")

from engine.drivers.redis import RedisDriver
from tests.support.requests import numbered as request
from tests.support.server_time import SKEW_MS, SkewedClock, check_wrong_clock_keeps_servers_time


@pytest.mark.parametrize("skew_ms", [SKEW_MS, -SKEW_MS])
async def test_a_machine_whose_clock_is_wrong_keeps_the_servers_time(
    database_url: str, caplog: pytest.LogCaptureFixture, skew_ms: int
) -> None:
    honest = cast(RedisDriver, open_driver(database_url))
    skewed = cast(RedisDriver, open_driver(database_url, clock=SkewedClock(skew_ms)))
    try:
        await check_wrong_clock_keeps_servers_time(honest, skewed, skew_ms, request, caplog)
    finally:
        await honest.close()
        await skewed.close()
