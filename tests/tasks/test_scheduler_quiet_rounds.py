"""A round reads a task's stored state only when something may be due: a task its scheduler has
led without a break, whose next occurrence is still ahead, costs the round its lease renewal
alone (2,000 daily tasks: three statements each a round before, one now). What the read was for
still holds: a lease that changed hands, a clock stepped back, a failed firing read again."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from engine import JobContext, JobRegistry, Jobs, ManualClock, job
from engine.tasks import Scheduler, task

MINUTE = 60_000
HOUR = 60 * MINUTE
START = 1_767_225_600_000 + 1_000  # 2026-01-01T00:00:01Z


class Hour(BaseModel):
    at: int


def count_reads(monkeypatch: pytest.MonkeyPatch, jobs: Jobs) -> list[str]:
    reads: list[str] = []
    driver: Any = jobs.driver
    for method in ("task_state", "task_unfinished"):
        real = getattr(driver, method)

        async def counted(task: str, _real: Any = real, _method: str = method) -> Any:
            reads.append(_method)
            return await _real(task)

        monkeypatch.setattr(driver, method, counted)
    return reads


def hourly(registry: JobRegistry, fail: list[bool] | None = None) -> None:
    @job(queue="billing", idempotency_key=lambda i: f"hour:{i.at}", registry=registry)
    async def bill(input: Hour, ctx: JobContext) -> None:
        return None

    def entries(at: int) -> list[tuple[Any, dict[str, int]]]:
        if fail:
            raise RuntimeError("the billing table is locked")
        return [(bill, {"at": at})]

    task(name="hourly", cron="0 * * * *", tz="UTC", enqueue=entries, registry=registry)


async def test_a_led_task_with_nothing_due_reads_nothing(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    hourly(registry)
    clock.set(START)
    scheduler = Scheduler(jobs, holder="only")
    reads = count_reads(monkeypatch, jobs)
    await scheduler.round()
    assert reads == ["task_state", "task_unfinished"]  # its first round reads

    reads.clear()
    for _ in range(5):
        clock.advance(10 * MINUTE)
        assert (await scheduler.round()).fired == []
    assert reads == []

    clock.advance(10 * MINUTE)  # 01:00:01: the occurrence is due
    (fired,) = (await scheduler.round()).fired
    assert fired.occurrence_ms == START - 1_000 + HOUR
    assert reads == ["task_state", "task_unfinished"]


async def test_a_lease_that_changed_hands_is_read_again_and_fires_nothing_twice(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    hourly(registry)
    clock.set(START)
    a = Scheduler(jobs, holder="a", lease_ms=MINUTE)
    b = Scheduler(jobs, holder="b", lease_ms=MINUTE)
    await a.round()  # a leads, its next occurrence is 01:00
    clock.advance(2 * MINUTE)  # a stalls past its lease; b takes it
    assert (await b.round()).leader
    clock.advance(HOUR - 2 * MINUTE)
    fired_by_b = (await b.round()).fired
    assert [f.occurrence_ms for f in fired_by_b] == [START - 1_000 + HOUR]
    clock.advance(2 * MINUTE)  # b stalls in turn; a takes the lease back
    assert (await a.round()).fired == []  # read again: b fired 01:00 already
    page = await jobs.list(name="bill", limit=10)
    assert [j.idempotency_key for j in page.jobs] == [f"task:hourly:{START - 1_000 + HOUR}"]


async def test_a_clock_stepped_back_reads_again(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    hourly(registry)
    clock.set(START + 3 * HOUR)
    scheduler = Scheduler(jobs, holder="only")
    await scheduler.round()
    reads = count_reads(monkeypatch, jobs)
    clock.set(START + HOUR)  # stepped back two hours
    await scheduler.round()
    assert reads == ["task_state", "task_unfinished"]


async def test_a_failed_firing_is_read_again_next_round(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    fail = [True]
    hourly(registry, fail)
    clock.set(START)
    scheduler = Scheduler(jobs, holder="only")
    await scheduler.round()
    clock.advance(HOUR)
    assert "hourly" in (await scheduler.round()).failed
    fail.clear()
    reads = count_reads(monkeypatch, jobs)
    clock.advance(MINUTE)
    (fired,) = (await scheduler.round()).fired
    assert fired.occurrence_ms == START - 1_000 + HOUR
    assert reads == ["task_state", "task_unfinished"]
