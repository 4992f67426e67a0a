"""A task's stored state gone though it fired (a store reset, as a Redis restarted without
persistence is; rows deleted; a database swapped for a fresh one): the scheduler said it
"skipped" the occurrences that fired before the loss, and under catch_up='all' fired them again
(their dedupe keys went with a reset). It now fires on from what it knows fired, else from now,
says so in one line, and keeps "skipped" for occurrences that really were missed."""

from __future__ import annotations

import logging
import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from engine import JobContext, JobRegistry, Jobs, ManualClock, job
from engine.tasks import Scheduler, SchedulerRound, task
from tests.tasks.every_store import any_jobs, kind_of

__all__ = ["any_jobs"]  # the fixture, used by name

MINUTE = 60_000
HOUR = 60 * MINUTE
START = 1_767_225_600_000  # 2026-01-01T00:00Z
LOST = "its stored state reads as none though it fired before"


class Tick(BaseModel):
    at: int


def declare(registry: JobRegistry, cron: str, catch_up: str = "skip") -> None:
    @job(idempotency_key=lambda i: f"tick:{i.at}", registry=registry)
    async def tick(input: Tick, ctx: JobContext) -> None:
        return None

    task(
        name="t",
        cron=cron,
        tz="UTC",
        enqueue=lambda at: [(tick, {"at": at})],
        catch_up="all" if catch_up == "all" else "skip",
        registry=registry,
    )


async def remove_state(jobs: Jobs, tmp_path: Path, name: str) -> None:
    """The task's state removed, as a reset store or a fresh database has none."""
    kind = kind_of(jobs)
    driver: Any = jobs.driver
    if kind == "memory":
        driver._tasks.pop(name)
    elif kind == "sqlite":
        conn = sqlite3.connect(f"{tmp_path}/jobs.db", isolation_level=None)
        try:
            conn.execute("DELETE FROM mcp_jobs_scheduler_state WHERE task = ?", (name,))
        finally:
            conn.close()
    elif kind == "postgres":
        async with driver.db.conn() as conn:
            await conn.execute(f"DELETE FROM {driver.schema}.scheduler_state WHERE task = $1", name)
    elif kind == "redis":
        await driver._store.client.hdel(driver._store.keys.tasks, name)
    else:
        from engine.drivers.nats import keys

        store = await driver._open()
        await store.kv.delete(keys.task(name))


def fired(*rounds: SchedulerRound) -> list[int]:
    return [f.occurrence_ms - START for r in rounds for f in r.fired]


def lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "mcp_jobs.scheduler" and r.levelno >= logging.WARNING
    ]


@pytest.mark.parametrize("catch_up", ["skip", "all"])
async def test_a_task_that_fired_once_before_its_state_went_fires_on_from_there(
    any_jobs: Jobs,
    registry: JobRegistry,
    clock: ManualClock,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    catch_up: str,
) -> None:
    jobs = any_jobs
    declare(registry, "0 * * * *", catch_up)
    clock.set(START)
    scheduler = Scheduler(jobs, holder="only")
    await scheduler.round()
    clock.advance(HOUR)
    assert fired(await scheduler.round()) == [HOUR]
    await remove_state(jobs, tmp_path, "t")
    with caplog.at_level(logging.WARNING, "mcp_jobs.scheduler"):
        clock.advance(HOUR)
        assert fired(await scheduler.round()) == [2 * HOUR]  # 01:00 neither skipped nor again
    (line,) = lines(caplog)
    assert LOST in line and "it fires on from 2026-01-01T01:00:00+00:00" in line
    page = await jobs.list(name="tick", limit=10)
    assert max(Counter(j.idempotency_key for j in page.jobs).values()) == 1


@pytest.mark.parametrize("catch_up", ["skip", "all"])
async def test_a_peer_taking_over_a_task_whose_state_went_claims_no_skip(
    any_jobs: Jobs,
    registry: JobRegistry,
    clock: ManualClock,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    catch_up: str,
) -> None:
    jobs = any_jobs
    declare(registry, "* * * * *", catch_up)
    clock.set(START)
    a, b = Scheduler(jobs, holder="a"), Scheduler(jobs, holder="b")
    await a.round()
    await b.round()
    for _ in range(3):
        clock.advance(MINUTE)
        assert len((await a.round()).fired) == 1
        assert (await b.round()).fired == []  # a leads
    await remove_state(jobs, tmp_path, "t")
    with caplog.at_level(logging.WARNING, "mcp_jobs.scheduler"):
        clock.advance(a.lease_ms + 1)  # a is gone; b takes the task over
        assert (await b.round()).fired == []
        clock.advance(MINUTE)
        assert fired(await b.round()) == [4 * MINUTE]
    (line,) = lines(caplog)
    assert LOST in line and "fires on from now (2026-01-01T00:03:30.001000+00:00)" in line
    assert "none of them counted as skipped nor fired again" in line


async def test_a_peer_taking_over_a_task_that_never_fired_fires_it_as_new(
    any_jobs: Jobs, registry: JobRegistry, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    """A daily task a peer led but never had to fire (a deploy hands it over): no state is
    stored, none was lost, and what came due after the handover fires, with no line."""
    jobs = any_jobs
    declare(registry, "0 0 * * *")
    clock.set(START + HOUR)
    a, b = Scheduler(jobs, holder="a"), Scheduler(jobs, holder="b")
    await a.round()
    await b.round()
    with caplog.at_level(logging.WARNING, "mcp_jobs.scheduler"):
        clock.advance(23 * HOUR + a.lease_ms)  # a died before midnight, holding the lease
        assert fired(await b.round()) == [24 * HOUR]
    assert lines(caplog) == []


async def test_a_real_outage_with_the_state_intact_is_still_reported_skipped(
    any_jobs: Jobs, registry: JobRegistry, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    jobs = any_jobs
    declare(registry, "0 * * * *")
    clock.set(START)
    a, b = Scheduler(jobs, holder="a"), Scheduler(jobs, holder="b")
    await a.round()
    clock.advance(HOUR)
    assert fired(await a.round()) == [HOUR]
    with caplog.at_level(logging.WARNING, "mcp_jobs.scheduler"):
        clock.advance(4 * HOUR)  # every scheduler down: 02:00 to 04:00 missed
        assert fired(await b.round()) == [5 * HOUR]
    assert lines(caplog) == [
        "task t: skipped 3 occurrences from 2026-01-01T02:00:00+00:00 to "
        "2026-01-01T04:00:00+00:00 under catch_up='skip' (its latest, "
        "2026-01-01T05:00:00+00:00, fired)"
    ]
