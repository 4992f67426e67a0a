"""A clock stepped back behind a task's last fired occurrence (a VM restored from a snapshot,
NTP correcting a fast clock) makes the task fire on from now, so the occurrences between now and
the one it last fired come due again and fire a second time: a job of theirs that already
finished runs again. The one warning the scheduler logs says so, with how many, rather than let
those second runs come unannounced."""

from __future__ import annotations

import logging

import pytest
from pydantic import BaseModel

from engine import JobContext, JobRegistry, Jobs, ManualClock, Worker, job
from engine.tasks import Scheduler, task

MINUTE = 60_000
HOUR = 60 * MINUTE
START = 1_767_225_600_000  # 2026-01-01T00:00Z


class Tick(BaseModel):
    at: int


async def test_the_step_back_warning_names_the_occurrences_that_fire_a_second_time(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    ran: list[int] = []

    @job(idempotency_key=lambda i: f"tick:{i.at}", registry=registry)
    async def tick(input: Tick, ctx: JobContext) -> None:
        ran.append(input.at)

    task(
        name="hourly",
        cron="0 * * * *",
        tz="UTC",
        enqueue=lambda at: [(tick, {"at": at})],
        registry=registry,
    )
    clock.set(START + 10 * HOUR + 5 * MINUTE)
    scheduler = Scheduler(jobs, holder="only")
    await scheduler.round()
    for _ in range(2):  # 11:00 and 12:00 fire, and their jobs finish
        clock.advance(HOUR)
        await scheduler.round()
        await Worker(jobs, scheduler=False).run_until_idle()
    assert ran == [START + 11 * HOUR, START + 12 * HOUR]

    clock.advance(-2 * HOUR)  # 12:05 -> 10:05
    with caplog.at_level(logging.WARNING, "mcp_jobs.scheduler"):
        for _ in range(2 * 12):
            clock.advance(5 * MINUTE)
            await scheduler.round()
            await Worker(jobs, scheduler=False).run_until_idle()
    # What "fires on from now" costs: both occurrences ran a second time.
    assert ran[2:] == [START + 11 * HOUR, START + 12 * HOUR]
    (warning,) = [r.getMessage() for r in caplog.records if "stepped back" in r.getMessage()]
    assert "2 occurrences" in warning and "fire again" in warning, warning
