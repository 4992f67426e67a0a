"""Many machines on one store, one whose clock is set wrong (what NTP left undone on it): a
driver that serves many machines reads this machine's clock as its server reads its own, so a
lease held on either machine is not over on the other (a fast clock took them over, and the job
ran twice; a slow one wrote leases already over for everyone else), and a job either enqueues
for now is due on the other. A driver of one machine (memory, SQLite) is not held to this."""

from __future__ import annotations

import logging

import pytest
from pydantic import BaseModel

from engine import JobContext, JobRegistry, ManualClock, connect, job
from engine.clock import AGREES_WITHIN_MS, ServerClock, SystemClock
from engine.drivers import open_driver
from engine.drivers.base import Driver
from engine.errors import JobNotFoundError
from engine.testing.requests import numbered
from schemas.jobs import EnqueueRequest

SKEW_MS = 120_000
# Two machines' readings of the server's clock agree to within this, not to the millisecond
# (a measure is off by up to half its round trip): each job is due this much before its
# enqueuer's now.
AGREE_MS = 5_000
LEASE_MS = 30_000


class SkewedClock(SystemClock):
    """This machine's clock, set `skew_ms` wrong."""

    def __init__(self, skew_ms: int) -> None:
        self.skew_ms = skew_ms

    def now_ms(self) -> int:
        return super().now_ms() + self.skew_ms


def _due(driver: Driver, n: int) -> EnqueueRequest:
    """Job `n`, due AGREE_MS before `driver`'s now."""
    return numbered(n, driver.clock.now_ms() - AGREE_MS, key=f"clock-{n}")


# Drivers whose store lives on one machine (a file): they read its clock.
ONE_MACHINE = ("sqlite",)


async def _many_machines(first: Driver, second: Driver) -> None:
    """Skip unless `first` and `second`, opened on one URL, share a store that machines share:
    not one in a process's memory (the memory driver, a kit's toy), not a file."""
    if first.kind in ONE_MACHINE:
        pytest.skip(f"the {first.kind} driver serves one machine: it reads that machine's clock")
    probe = numbered(99, first.clock.now_ms() + 86_400_000)  # no claim here takes it
    await first.enqueue([probe])
    try:
        await second.get(probe.id)
    except JobNotFoundError:
        pytest.skip(f"two {first.kind} drivers share no database: no second machine shares it")


@pytest.mark.parametrize("skew_ms", [SKEW_MS, -SKEW_MS])
async def test_a_machine_whose_clock_is_wrong_keeps_the_servers_time(
    database_url: str, caplog: pytest.LogCaptureFixture, skew_ms: int
) -> None:
    honest = open_driver(database_url)
    skewed = open_driver(database_url, clock=SkewedClock(skew_ms))
    try:
        await honest.migrate()
        with caplog.at_level(logging.WARNING):
            await skewed.migrate()
        await _many_machines(honest, skewed)
        side = "ahead of" if skew_ms > 0 else "behind"
        seconds = f"{abs(skew_ms) / 1000:.1f}"
        assert f"clock reads {seconds} s {side} the database server's" in caplog.text
        assert abs(skewed.clock.now_ms() - honest.clock.now_ms()) < AGREE_MS

        (held,) = await honest.enqueue([_due(honest, 1)])
        (claimed,) = await honest.claim("honest", 1, LEASE_MS)
        assert claimed.record.id == held.id
        assert await skewed.claim("skewed", 10, LEASE_MS) == []
        (mine,) = await honest.enqueue([_due(honest, 2)])
        (claimed,) = await skewed.claim("skewed", 1, LEASE_MS)
        assert claimed.record.id == mine.id
        assert await honest.claim("honest", 10, LEASE_MS) == []
        (due,) = await skewed.enqueue([_due(skewed, 3)])
        assert [c.record.id for c in await honest.claim("honest", 10, LEASE_MS)] == [due.id]
    finally:
        await honest.close()
        await skewed.close()


class Numbered(BaseModel):
    n: int


@pytest.mark.parametrize("skew_ms", [SKEW_MS, -SKEW_MS])
async def test_a_process_that_only_enqueues_writes_the_servers_time(
    database_url: str, skew_ms: int
) -> None:
    """A producer (a web app: it neither migrates nor runs a worker, so no beat measures for
    it) on a machine whose clock is wrong: the job it enqueues for now is due now for the
    others, made at the server's time, and its id, which orders lists, says that time."""
    registry = JobRegistry()

    @job(idempotency_key=lambda i: f"made:{i.n}", registry=registry)
    async def made(input: Numbered, ctx: JobContext) -> None:
        return None

    # The producer's measure is off by up to half its round trip, so its "now" may be a
    # millisecond or more past the server's: the machine that claims reads a clock a little
    # ahead, still within what is read as the server's time (AGREES_WITHIN_MS).
    honest = await connect(
        database_url, clock=SkewedClock(AGREES_WITHIN_MS // 2), registry=registry
    )
    producer = await connect(
        database_url, clock=SkewedClock(skew_ms), registry=registry, migrate=False
    )
    try:
        await _many_machines(honest.driver, producer.driver)
        enqueued = await producer.enqueue(made, {"n": 1})
        claimed = await honest.driver.claim("honest", 10, LEASE_MS)
        assert [c.record.id for c in claimed] == [enqueued.id]
        created_at = claimed[0].record.created_at
        assert abs(created_at - honest.clock.now_ms()) < AGREE_MS
        assert abs((int(enqueued.id[:16], 16) >> 16) - created_at) < AGREE_MS
    finally:
        await honest.close()
        await producer.close()


async def test_jobs_read_the_drivers_time_and_a_test_clock_is_left_alone(
    database_url: str,
) -> None:
    jobs = await connect(database_url, clock=SkewedClock(SKEW_MS), registry=JobRegistry())
    try:
        assert jobs.clock is jobs.driver.clock
        if isinstance(jobs.clock, ServerClock):  # a driver of many machines
            assert abs(jobs.clock.now_ms() - SystemClock().now_ms()) < AGREE_MS
    finally:
        await jobs.close()
    manual = ManualClock()
    driver = open_driver(database_url, clock=manual)
    try:
        await driver.migrate()
        assert driver.clock is manual and manual.now_ms() == ManualClock().now_ms()
    finally:
        await driver.close()
