"""After an outage the scheduler says what it cost: one warning per task saying how many
occurrences it skipped or is catching up (counted up to a bound), never one line per
occurrence; and an occurrence `skip` abandons after a failed round is named, not promised a
retry."""

from __future__ import annotations

import logging

import pytest
from pydantic import BaseModel

from engine import JobContext, JobRegistry, Jobs, ManualClock, job
from engine.tasks import Scheduler, task
from engine.tasks.notices import OUTAGE_COUNT_BOUND

MINUTE = 60_000
HOUR = 60 * MINUTE
DAY = 24 * HOUR
START = 1_767_225_600_000  # 2026-01-01T00:00Z


class Tick(BaseModel):
    at: int


def declare_tick(registry: JobRegistry) -> None:
    @job(idempotency_key=lambda i: f"tick:{i.at}", registry=registry)
    async def tick(input: Tick, ctx: JobContext) -> None:
        return None


def warnings_about(caplog: pytest.LogCaptureFixture, name: str) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "mcp_jobs.scheduler"
        and r.levelno == logging.WARNING
        and f"task {name}:" in r.getMessage()
    ]


async def test_an_outage_is_reported_once_per_task_with_what_it_skipped_or_catches_up(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    declare_tick(registry)
    task(
        name="minutely-skip",
        cron="* * * * *",
        tz="UTC",
        enqueue=lambda at: [("tick", {"at": at})],
        registry=registry,
    )
    task(
        name="minutely-all",
        cron="* * * * *",
        tz="UTC",
        enqueue=lambda at: [("tick", {"at": at + 1})],
        catch_up="all",
        max_catch_up=25,
        registry=registry,
    )
    clock.set(START)
    scheduler = Scheduler(jobs, holder="only")
    await scheduler.round()
    clock.advance(MINUTE)
    assert len((await scheduler.round()).fired) == 2
    with caplog.at_level(logging.INFO, "mcp_jobs.scheduler"):
        clock.advance(MINUTE)
        await scheduler.round()  # one occurrence each, on time: no outage
        assert [r for r in caplog.records if r.name == "mcp_jobs.scheduler"] == []
        clock.advance(HOUR)  # down for an hour: 60 occurrences each
        rounds = [await scheduler.round() for _ in range(3)]
    assert [len(r.fired) for r in rounds] == [26, 25, 10]
    skipped = warnings_about(caplog, "minutely-skip")
    assert skipped == [
        "task minutely-skip: skipped 59 occurrences from 2026-01-01T00:03:00+00:00 to "
        "2026-01-01T01:01:00+00:00 under catch_up='skip' (its latest, "
        "2026-01-01T01:02:00+00:00, fired)"
    ]
    caught_up = warnings_about(caplog, "minutely-all")
    assert caught_up == [
        "task minutely-all: catching up 60 occurrences from 2026-01-01T00:03:00+00:00 under "
        "catch_up='all', oldest first, at most 25 a round"
    ]


async def test_a_long_outage_is_counted_up_to_a_bound(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    declare_tick(registry)
    task(
        name="week-skip",
        cron="* * * * *",
        tz="UTC",
        enqueue=lambda at: [("tick", {"at": at})],
        registry=registry,
    )
    task(
        name="week-all",
        cron="* * * * *",
        tz="UTC",
        enqueue=lambda at: [("tick", {"at": at + 1})],
        catch_up="all",
        registry=registry,
    )
    clock.set(START)
    scheduler = Scheduler(jobs, holder="only")
    await scheduler.round()
    clock.advance(MINUTE)
    await scheduler.round()
    with caplog.at_level(logging.WARNING, "mcp_jobs.scheduler"):
        clock.advance(7 * DAY)
        for _ in range(3):
            await scheduler.round()
    (skipped,) = warnings_about(caplog, "week-skip")
    assert skipped.startswith(
        f"task week-skip: skipped more than {OUTAGE_COUNT_BOUND} occurrences from "
        "2026-01-01T00:02:00+00:00 to 2026-01-08T00:00:00+00:00 under catch_up='skip'"
    )
    (behind,) = warnings_about(caplog, "week-all")
    assert behind.startswith(
        f"task week-all: catching up more than {OUTAGE_COUNT_BOUND} occurrences from "
        "2026-01-01T00:02:00+00:00 under catch_up='all'"
    )


async def test_a_failed_occurrence_that_skip_replaces_is_named_and_never_promised_a_retry(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    declare_tick(registry)
    down = {"now": True}

    def flaky(at: int) -> list[tuple[str, dict[str, int]]]:
        if down["now"]:
            raise ConnectionError("the app's database is down")
        return [("tick", {"at": at})]

    task(name="flaky", cron="* * * * *", tz="UTC", enqueue=flaky, registry=registry)
    clock.set(START)
    scheduler = Scheduler(jobs, holder="only")
    await scheduler.round()
    clock.advance(MINUTE)
    failed = (await scheduler.round()).failed["flaky"]
    assert failed.code == "TASK_ENQUEUE_FAILED"
    assert "tried again next round" not in failed.cause
    assert "catch_up='skip'" in failed.cause  # a newer occurrence replaces it
    down["now"] = False
    clock.advance(MINUTE)
    with caplog.at_level(logging.WARNING, "mcp_jobs.scheduler"):
        (fired,) = (await scheduler.round()).fired
    assert fired.occurrence_ms == START + 2 * MINUTE
    (abandoned,) = warnings_about(caplog, "flaky")
    assert "2026-01-01T00:01:00+00:00" in abandoned and "TASK_ENQUEUE_FAILED" in abandoned


async def test_a_failed_occurrence_under_all_is_promised_the_retry_it_gets(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    declare_tick(registry)
    down = {"now": True}

    def flaky(at: int) -> list[tuple[str, dict[str, int]]]:
        if down["now"]:
            raise ConnectionError("the app's database is down")
        return [("tick", {"at": at})]

    task(name="flaky", cron="* * * * *", tz="UTC", enqueue=flaky, catch_up="all", registry=registry)
    clock.set(START)
    scheduler = Scheduler(jobs, holder="only")
    await scheduler.round()
    clock.advance(MINUTE)
    failed = (await scheduler.round()).failed["flaky"]
    assert "tried again next round" in failed.cause
    down["now"] = False
    clock.advance(MINUTE)
    fired = [f.occurrence_ms for f in (await scheduler.round()).fired]
    assert fired == [START + MINUTE, START + 2 * MINUTE]
