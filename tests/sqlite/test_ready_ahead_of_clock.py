"""A job made ready by a clock ahead of this one (a clock stepped back since, as SQLite's one
machine clock may be) is no ready work yet: the stats count it delayed while no claim can take it,
and ready once its time comes, when the claim takes it. A shed stays ready (rule 7)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from engine import ManualClock
from engine.drivers.base import JobStore
from engine.drivers.memory import MemoryDriver
from engine.drivers.sqlite import SqliteDriver
from schemas.jobs import NackOptions
from tests.sqlite.enqueues import START, request

HOUR = 3_600_000


@pytest.fixture(params=["sqlite", "memory"])
async def driven(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[JobStore, ManualClock]]:
    clock = ManualClock(START)
    if request.param == "memory":
        yield MemoryDriver(clock), clock
        return
    d = SqliteDriver(str(tmp_path / "jobs.db"), clock=clock)
    await d.migrate()
    yield d, clock
    await d.close()


async def test_a_job_ready_ahead_of_the_clock_counts_delayed_until_its_time(
    driven: tuple[JobStore, ManualClock],
) -> None:
    driver, clock = driven
    clock.set(START + HOUR)  # the clock an hour fast when the job was made, then stepped back
    ahead = request(1)._replace(run_at=START + HOUR)
    await driver.enqueue([ahead])
    clock.set(START)
    [queue] = await driver.stats()
    assert (queue.ready, queue.delayed) == (0, 1)
    assert await driver.claim("w1", 10, 30_000) == []

    clock.set(START + HOUR)  # its time: ready, and the claim takes it
    [queue] = await driver.stats()
    assert (queue.ready, queue.delayed) == (1, 0)
    [claimed] = await driver.claim("w1", 10, 30_000)
    assert claimed.record.id == ahead.id


async def test_a_shed_job_waiting_out_its_delay_stays_ready(
    driven: tuple[JobStore, ManualClock],
) -> None:
    driver, _ = driven
    await driver.enqueue([request(1)])
    [claimed] = await driver.claim("w1", 10, 30_000)
    shed = NackOptions(delay_ms=60_000, counts_as_attempt=False)
    await driver.nack(claimed.record.id, claimed.token, shed)
    [queue] = await driver.stats()
    assert (queue.ready, queue.delayed) == (1, 0)
    assert await driver.claim("w1", 10, 30_000) == []
