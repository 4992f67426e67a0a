"""Many machines share one database, and each compares times another wrote: a lease's expiry, a
job's due time, a worker's last beat. A machine whose clock runs fast took over every lease still
held elsewhere (the job ran twice), and one whose clock runs slow wrote leases already over for
everyone else. The driver reads this machine's clock as the server reads its own."""

from __future__ import annotations

import pytest

from engine import JobRegistry, ManualClock, connect
from engine.clock import ServerClock, SystemClock
from engine.drivers.postgres import PostgresDriver
from schemas.jobs import EnqueueRequest
from tests.postgres.builders import request
from tests.support.server_time import (
    AGREE_MS,
    SKEW_MS,
    SkewedClock,
    check_wrong_clock_keeps_servers_time,
)


def _request(n: int, now: int) -> EnqueueRequest:
    return request(now, key=f"k{n}")


@pytest.mark.parametrize("skew_ms", [SKEW_MS, -SKEW_MS])
async def test_a_machine_whose_clock_is_wrong_keeps_the_servers_time(
    pg_url: str, caplog: pytest.LogCaptureFixture, skew_ms: int
) -> None:
    honest = PostgresDriver(pg_url)
    skewed = PostgresDriver(pg_url, clock=SkewedClock(skew_ms))
    try:
        await check_wrong_clock_keeps_servers_time(honest, skewed, skew_ms, _request, caplog)
    finally:
        await honest.close()
        await skewed.close()


async def test_jobs_read_the_drivers_time_and_a_test_clock_is_left_alone(pg_url: str) -> None:
    jobs = await connect(pg_url, clock=SkewedClock(SKEW_MS), registry=JobRegistry())
    try:
        assert isinstance(jobs.clock, ServerClock) and jobs.clock is jobs.driver.clock
        assert abs(jobs.clock.now_ms() - SystemClock().now_ms()) < AGREE_MS
    finally:
        await jobs.close()
    manual = ManualClock()
    driver = PostgresDriver(pg_url, clock=manual)
    try:
        await driver.migrate()
        assert driver.clock is manual and manual.now_ms() == ManualClock().now_ms()
    finally:
        await driver.close()
