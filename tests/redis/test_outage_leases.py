"""After an outage, running jobs keep their leases one lease longer (as on PostgreSQL and NATS):
a claim by a process that saw the server go away, or hang, takes over no expired lease until one
lease after its first claim that succeeds, so a settle held through the outage lands instead of
the job running again. On servers these tests start, kill and SIGSTOP themselves."""

from __future__ import annotations

from pathlib import Path
from typing import cast

import anyio
import pytest

from engine import ManualClock
from engine.driver_errors import DriverUnavailableError
from engine.drivers import open_driver
from engine.drivers.base import AckWrite
from engine.testing.requests import numbered as request
from tests.redis.server import own_server
from tests.support.answering import answered

pytest.importorskip("redis", reason="the redis extra is not installed")

from engine.drivers.redis import RedisDriver

pytestmark = pytest.mark.slow

LEASE_MS = 30_000


async def _two_held(driver: RedisDriver, clock: ManualClock) -> list[str]:
    await driver.migrate()
    await driver.enqueue([request(1, clock.now_ms()), request(2, clock.now_ms())])
    held = await driver.claim("holder", 2, LEASE_MS)
    assert len(held) == 2
    return [c.token for c in held] + [c.record.id for c in held]


async def _spared_then_taken_over(
    driver: RedisDriver, clock: ManualClock, tokens_and_ids: list[str]
) -> None:
    first_token, _, first_id, second_id = tokens_and_ids
    clock.advance(LEASE_MS + 1)  # the outage outlasted the leases
    # The first claim after the outage leaves the expired leases to their holders.
    assert await answered(lambda: driver.claim("other", 2, LEASE_MS)) == []
    done = AckWrite(first_id, first_token, {"ok": True})
    assert await answered(lambda: driver.ack_many([done])) == [None]
    assert await driver.claim("other", 2, LEASE_MS) == []
    # One lease later, a holder that never came back loses its job as usual (rule 13).
    clock.advance(LEASE_MS)
    taken = await driver.claim("other", 2, LEASE_MS)
    assert [c.record.id for c in taken] == [second_id]
    assert (await driver.get(first_id)).state == "done"
    assert (await driver.get(second_id)).attempt == 2


async def test_after_a_restart_held_leases_are_taken_over_one_lease_later(
    tmp_path: Path,
) -> None:
    with own_server(tmp_path, appendonly="yes", appendfsync="always") as server:
        clock = ManualClock()
        driver = cast(RedisDriver, open_driver(server.url, clock=clock))
        try:
            held = await _two_held(driver, clock)
            server.kill()
            with anyio.fail_after(30), pytest.raises(DriverUnavailableError):
                await driver.claim("other", 2, LEASE_MS)
            await anyio.to_thread.run_sync(server.start)
            await _spared_then_taken_over(driver, clock, held)
        finally:
            await driver.close()


async def test_after_the_server_hung_held_leases_are_taken_over_one_lease_later(
    tmp_path: Path,
) -> None:
    with own_server(tmp_path) as server:
        clock = ManualClock()
        driver = cast(RedisDriver, open_driver(server.url, clock=clock, reply_timeout_s=0.5))
        try:
            held = await _two_held(driver, clock)
            server.pause()  # SIGSTOP: connected, and no answer
            with anyio.fail_after(30), pytest.raises(DriverUnavailableError):
                await driver.claim("other", 2, LEASE_MS)
            server.resume()
            await _spared_then_taken_over(driver, clock, held)
        finally:
            await driver.close()


async def test_without_an_outage_an_expired_lease_is_taken_over_at_once(
    tmp_path: Path,
) -> None:
    with own_server(tmp_path) as server:
        clock = ManualClock()
        driver = cast(RedisDriver, open_driver(server.url, clock=clock))
        try:
            _, _, first_id, second_id = await _two_held(driver, clock)
            clock.advance(LEASE_MS + 1)
            taken = await driver.claim("other", 2, LEASE_MS)
            assert sorted(c.record.id for c in taken) == sorted([first_id, second_id])
        finally:
            await driver.close()
