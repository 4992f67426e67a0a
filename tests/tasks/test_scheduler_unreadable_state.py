"""A task whose stored state stops reading (another program wrote it, or it was removed) fires
on from now, as the README says: it never fires again what it fired before."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from pydantic import BaseModel

from engine import JobContext, JobRegistry, Jobs, ManualClock, Worker, job
from engine.tasks import Scheduler, task
from tests.tasks.every_store import any_jobs, state_spoiler

__all__ = ["any_jobs"]  # the fixture, used by name

MINUTE = 60_000
HOUR = 60 * MINUTE


class Hour(BaseModel):
    at: int


async def test_a_catch_up_all_task_whose_state_stops_reading_fires_on_from_now(
    any_jobs: Jobs, registry: JobRegistry, clock: ManualClock, tmp_path: Path
) -> None:
    jobs = any_jobs

    @job(queue="billing", idempotency_key=lambda i: f"hour:{i.at}", registry=registry)
    async def bill(input: Hour, ctx: JobContext) -> None:
        return None

    task(
        name="hourly-billing",
        cron="0 * * * *",
        tz="UTC",
        enqueue=lambda at: [(bill, {"at": at})],
        catch_up="all",
        max_catch_up=100,
        registry=registry,
    )
    clock.set(1_767_225_600_000 + 1_000)
    scheduler = Scheduler(jobs, holder="only")
    fired: list[int] = []
    for _ in range(24):
        clock.advance(HOUR)
        fired += [f.occurrence_ms for f in (await scheduler.round()).fired]
    assert len(fired) == 24
    await Worker(jobs, scheduler=False, prune=False).run_until_idle()  # the bills are settled

    await state_spoiler(jobs, tmp_path)("hourly-billing")
    clock.advance(MINUTE)
    assert (await scheduler.round()).fired == []  # nothing since the scheduler started again
    clock.advance(HOUR)
    (next_one,) = (await scheduler.round()).fired
    assert next_one.occurrence_ms == fired[-1] + HOUR
    page = await jobs.list(name="bill", limit=100)
    assert max(Counter(j.idempotency_key for j in page.jobs).values()) == 1
    assert len(page.jobs) == 25
