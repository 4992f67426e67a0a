"""A scheduler that dies between claiming an occurrence and enqueuing its jobs loses nothing: the
next scheduler to lead the task enqueues them, once, on every store."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from pydantic import BaseModel

from engine import JobContext, JobRegistry, Jobs, ManualClock, job
from engine.driver_errors import DriverUnavailableError
from engine.errors import JobsError
from engine.tasks import Scheduler, describe_tasks, task
from tests.tasks.every_store import Killed, any_jobs, inserts_die

__all__ = ["any_jobs"]  # the fixture, used by name

HOUR = 3_600_000
LEASE_MS = 30_000


class Day(BaseModel):
    at: int


def declare_daily(registry: JobRegistry) -> None:
    @job(queue="invoices", idempotency_key=lambda i: f"day:{i.at}", registry=registry)
    async def invoice(input: Day, ctx: JobContext) -> None:
        return None

    task(
        name="daily-invoices",
        cron="0 6 * * *",
        tz="UTC",
        enqueue=lambda at: [(invoice, {"at": at})],
        catch_up="all",
        registry=registry,
    )


def killed() -> Exception:
    return Killed()


def store_refused() -> Exception:
    return DriverUnavailableError("store", "database is locked", "mcp-jobs db report")


@pytest.mark.parametrize("death", [killed, store_refused], ids=["killed", "refused"])
async def test_a_scheduler_dying_between_claim_and_enqueue_loses_no_occurrence(
    any_jobs: Jobs,
    registry: JobRegistry,
    clock: ManualClock,
    monkeypatch: pytest.MonkeyPatch,
    death: Callable[[], Exception],
) -> None:
    jobs = any_jobs
    declare_daily(registry)
    clock.set(1_767_225_600_000)  # 2026-01-01T00:00Z
    first = Scheduler(jobs, holder="first", lease_ms=LEASE_MS)
    await first.round()
    clock.advance(6 * HOUR)
    assert len((await first.round()).fired) == 1  # yesterday's, fired as any other day
    clock.advance(24 * HOUR)
    occurrence = clock.now_ms()
    with monkeypatch.context() as patch:
        inserts_die(patch, jobs, death)
        try:
            report = await first.round()
        except Killed:
            pass  # the process is gone
        else:
            assert report.fired == [] and set(report.failed) == {"daily-invoices"}
            assert isinstance(report.failed["daily-invoices"], JobsError)
    # `first` is never run again: its worker was killed, or stopped before its next round.
    second = Scheduler(jobs, holder="second", lease_ms=LEASE_MS)
    clock.advance(LEASE_MS)  # the dead holder's lease runs out
    fired = []
    for _ in range(3):
        fired += [(f.task, f.occurrence_ms) for f in (await second.round()).fired]
        clock.advance(60_000)
    assert fired == [("daily-invoices", occurrence)]
    page = await jobs.list(name="invoice", limit=10)
    keys = sorted(j.idempotency_key for j in page.jobs)
    assert keys == [f"task:daily-invoices:{at}" for at in (occurrence - 24 * HOUR, occurrence)]
    (described,) = await describe_tasks(jobs, count=1)
    assert described.last_fired is not None and described.last_fired.at == occurrence
