"""A settle held through dropped connections says so: one warning line when the hold starts and
one line when the settle is written, not a line a try (README: "one warning line when it
starts, one when it is written")."""

from __future__ import annotations

import logging
from typing import Any, cast

import pytest

from engine import ManualClock
from engine.drivers import open_driver
from engine.drivers.base import AckWrite

pytest.importorskip("redis", reason="the redis extra is not installed")

from redis.exceptions import ConnectionError as RedisConnectionError

from engine.drivers.redis import RedisDriver
from engine.testing.requests import numbered as request
from tests.support.paced_clock import PacedClock


async def test_a_held_ack_logs_one_line_as_it_starts_and_one_when_written(
    database_url: str, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    driver = cast(RedisDriver, open_driver(database_url, clock=clock, retry_clock=PacedClock()))
    try:
        await driver.migrate()
        await driver.enqueue([request(1, clock.now_ms())])
        (claimed,) = await driver.claim("w", 1, 60_000)
        real = driver._store.pipelined  # pyright: ignore[reportPrivateUsage]
        sent: list[int] = []

        async def flaky(script: Any, calls: Any) -> list[Any]:
            sent.append(len(calls))
            if len(sent) <= 4:
                raise RedisConnectionError("Connection closed by server.")
            return await real(script, calls)

        driver._store.pipelined = flaky  # type: ignore[method-assign]
        caplog.set_level(logging.INFO)
        outcomes = await driver.ack_many([AckWrite(claimed.record.id, claimed.token, None)])
        assert (outcomes, len(sent)) == ([None], 5)
    finally:
        await driver.close()
    held = [r for r in caplog.records if "held" in r.getMessage()]
    assert [r.levelno for r in held] == [logging.WARNING, logging.INFO], caplog.text
    assert claimed.record.id in held[0].getMessage()
    assert "is written" in held[1].getMessage()
