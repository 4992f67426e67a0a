"""The scheduler under a clock stepped back, far forward, or failing tasks: it neither stays
silent, nor raises, nor logs the same failure every round."""

from __future__ import annotations

import logging

import pytest
from pydantic import BaseModel

from engine import JobContext, JobRegistry, Jobs, ManualClock, job
from engine.fix_lines import as_raised
from engine.tasks import Scheduler, describe_tasks, task
from engine.tasks.scheduler import CLOCK_STEP_MS

MINUTE = 60_000
YEAR = 365 * 24 * 60 * MINUTE


class Tick(BaseModel):
    at: int


def declare_minutely(registry: JobRegistry) -> None:
    @job(idempotency_key=lambda i: f"tick:{i.at}", registry=registry)
    async def tick(input: Tick, ctx: JobContext) -> None:
        return None

    task(
        name="minutely",
        cron="* * * * *",
        tz="UTC",
        enqueue=lambda at: [(tick, {"at": at})],
        registry=registry,
    )


async def test_a_clock_stepped_back_past_the_last_fired_occurrence_fires_on_from_now(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    declare_minutely(registry)
    scheduler = Scheduler(jobs, holder="only")
    await scheduler.round()
    clock.advance(YEAR)  # fired a year ahead (a clock set wrong), then set right again
    assert len((await scheduler.round()).fired) == 1
    clock.advance(-YEAR + 30_000)
    with caplog.at_level(logging.WARNING, "mcp_jobs.scheduler"):
        fired: list[int] = []
        for _ in range(4):
            clock.advance(MINUTE)
            fired += [f.occurrence_ms for f in (await scheduler.round()).fired]
    assert len(fired) == 3 and all(at <= clock.now_ms() for at in fired)
    assert len([r for r in caplog.records if "stepped back" in r.getMessage()]) == 1
    (described,) = await describe_tasks(jobs, count=1)
    assert described.last_fired is not None and described.last_fired.at == fired[-1]
    assert described.next_occurrences[0].at == fired[-1] + MINUTE


async def test_a_last_fired_occurrence_just_ahead_is_skew_and_is_not_fired_again(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    declare_minutely(registry)
    scheduler = Scheduler(jobs, holder="only")
    await scheduler.round()
    clock.advance(MINUTE)
    (first,) = (await scheduler.round()).fired
    clock.advance(-CLOCK_STEP_MS // 2)  # another process's clock, a little behind
    (described,) = await describe_tasks(jobs, count=1)
    # Held until the occurrence it already fired: describe lists the one after it.
    assert described.next_occurrences[0].at == first.occurrence_ms + MINUTE
    clock.advance(CLOCK_STEP_MS // 2)
    assert (await scheduler.round()).fired == []


async def test_a_manual_clock_at_the_end_of_time_answers_a_typed_error(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    declare_minutely(registry)
    clock.set(253_402_300_799_000)  # 9999-12-31T23:59:59Z
    scheduler = Scheduler(jobs, holder="only")
    clock.advance(MINUTE)
    report = await scheduler.round()
    assert report.fired == []
    (described,) = await describe_tasks(jobs, count=3)
    assert described.next_occurrences == []


async def test_a_task_failing_every_round_logs_once_and_again_when_it_fires(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    task(
        name="orphan",
        cron="* * * * *",
        tz="UTC",
        enqueue=lambda at: [("gone_job", {"at": at})],
        registry=registry,
    )
    scheduler = Scheduler(jobs, holder="only")
    await scheduler.round()
    clock.advance(MINUTE)
    with caplog.at_level(logging.DEBUG, "mcp_jobs.scheduler"):
        for _ in range(5):
            assert [e.code for e in (await scheduler.round()).failed.values()] == ["JOB_UNKNOWN"]
            clock.advance(10_000)
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and "JOB_UNKNOWN" in errors[0].getMessage()
    # The error's fix, with it, as this client writes it (on memory://, the call on `jobs`).
    assert as_raised(jobs.fix_context, "mcp-jobs jobs describe --json") in errors[0].getMessage()
