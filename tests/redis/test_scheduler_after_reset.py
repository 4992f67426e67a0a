"""A Redis reset (restarted without persistence, FLUSHDB) takes every task's last fired
occurrence, its lease and its jobs' dedupe keys. The scheduler that took the task over next said
it "skipped" occurrences that had fired, and under catch_up='all' fired them again. Now it says
the state went, fires on from what it knows fired, else from now, and an outage it really
missed is still reported skipped."""

from __future__ import annotations

import logging

import pytest
from pydantic import BaseModel

from engine import JobContext, JobRegistry, Jobs, ManualClock, job
from engine.tasks import Scheduler, SchedulerRound, task
from schemas.stats import WorkerInfo

pytest.importorskip("redis", reason="the redis extra is not installed")

from redis.asyncio import Redis

from engine.drivers.redis import RedisDriver

MINUTE = 60_000
START = 1_767_225_600_000  # 2026-01-01T00:00Z
LOST = "its stored state reads as none though it fired before"


class Tick(BaseModel):
    at: int


def declare(registry: JobRegistry, catch_up: str) -> None:
    @job(idempotency_key=lambda i: f"tick:{i.at}", registry=registry)
    async def tick(input: Tick, ctx: JobContext) -> None:
        return None

    task(
        name="t",
        cron="* * * * *",
        tz="UTC",
        enqueue=lambda at: [(tick, {"at": at})],
        catch_up="all" if catch_up == "all" else "skip",
        registry=registry,
    )


async def beat(jobs: Jobs) -> None:
    """The worker's presence beat: the one after a reset installs the prefix again."""
    now = jobs.clock.now_ms()
    info = WorkerInfo(
        id="w1", hostname="h", pid=1, queues=None, concurrency=1, started_at=now, last_seen_at=now
    )
    await jobs.driver.worker_seen(info)


async def reset(jobs: Jobs) -> None:
    """FLUSHDB, as far as this test's own prefix goes (the test server is shared), then a beat."""
    driver = jobs.driver
    assert isinstance(driver, RedisDriver)
    client: Redis = driver._store.client
    async for key in client.scan_iter(match=f"{driver.prefix}*", count=1_000):
        await client.delete(key)
    await beat(jobs)


def fired(*rounds: SchedulerRound) -> list[int]:
    return [f.occurrence_ms - START for r in rounds for f in r.fired]


def lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "mcp_jobs.scheduler" and r.levelno >= logging.WARNING
    ]


@pytest.mark.parametrize("catch_up", ["skip", "all"])
async def test_after_a_reset_no_skip_is_claimed_and_a_real_gap_still_is(
    jobs: Jobs,
    registry: JobRegistry,
    clock: ManualClock,
    caplog: pytest.LogCaptureFixture,
    catch_up: str,
) -> None:
    declare(registry, catch_up)
    clock.set(START)
    a, b = Scheduler(jobs, holder="a"), Scheduler(jobs, holder="b")
    await beat(jobs)
    await a.round()
    await b.round()
    for _ in range(3):
        clock.advance(MINUTE)
        assert len((await a.round()).fired) == 1
        await b.round()  # sees a lead the task
    clock.advance(MINUTE // 4)
    with caplog.at_level(logging.ERROR, "mcp_jobs.redis"):
        await reset(jobs)
    (error,) = [r.getMessage() for r in caplog.records if r.name == "mcp_jobs.redis"]
    assert "fires it on from the one it knows fired, else from now" in error

    with caplog.at_level(logging.WARNING, "mcp_jobs.scheduler"):
        clock.advance(MINUTE // 4)  # b's round comes first: the reset freed the lease
        assert fired(await b.round(), await a.round()) == []
        clock.advance(MINUTE // 2)
        assert fired(await a.round(), await b.round()) == [4 * MINUTE]
        # Each says it once: b knows nothing of what fired, a what it fired (nothing came due
        # while b led).
        by_b, by_a = lines(caplog)
        assert LOST in by_b and "fires on from now (2026-01-01T00:03:30+00:00)" in by_b
        assert LOST in by_a and "it fires on from 2026-01-01T00:03:00+00:00" in by_a
        assert not [entry for entry in lines(caplog) if "skipped" in entry.split(":")[1]]

        # A real gap, the store intact since: every scheduler down for ten minutes.
        clock.advance(10 * MINUTE)
        caught = fired(await b.round(), await b.round())
    if catch_up == "skip":
        assert caught == [14 * MINUTE]
        assert lines(caplog)[2:] == [
            "task t: skipped 9 occurrences from 2026-01-01T00:05:00+00:00 to "
            "2026-01-01T00:13:00+00:00 under catch_up='skip' (its latest, "
            "2026-01-01T00:14:00+00:00, fired)"
        ]
    else:
        assert caught == [n * MINUTE for n in range(5, 15)]
        assert "catching up 10 occurrences from 2026-01-01T00:05:00" in lines(caplog)[2]


async def test_an_outage_that_ends_in_a_reset_is_reported_by_the_scheduler_that_led(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    """The server down for an hour and back empty: the scheduler that led the task knows what
    it fired, and that nothing fired since (it held the lease), so the hour's occurrences were
    missed, and it says so."""
    declare(registry, "skip")
    clock.set(START)
    scheduler = Scheduler(jobs, holder="only")
    await scheduler.round()
    for _ in range(2):
        clock.advance(MINUTE)
        await scheduler.round()
    clock.advance(60 * MINUTE)
    await reset(jobs)
    with caplog.at_level(logging.WARNING, "mcp_jobs.scheduler"):
        assert fired(await scheduler.round()) == [62 * MINUTE]
    lost, skipped = lines(caplog)
    assert LOST in lost and "it fires on from 2026-01-01T00:02:00+00:00" in lost
    assert skipped.startswith(
        "task t: skipped 59 occurrences from 2026-01-01T00:03:00+00:00 to 2026-01-01T01:01:00+00:00"
    )
