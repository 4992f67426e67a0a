"""`task_fire`, the claim and the enqueue of a task's occurrences as one step, on every store: a
lost claim writes nothing, a won one writes both, and on NATS (no transaction) the occurrences
it claimed stay recorded until their jobs are in."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from engine import JobContext, JobRegistry, Jobs, ManualClock, job
from engine.tasks import Scheduler, task
from engine.testing.kit.test_paging import request
from schemas.jobs import JobFilter
from tests.tasks.every_store import Killed, any_jobs, kind_of

__all__ = ["any_jobs"]  # the fixture, used by name

MINUTE = 60_000
LEASE_MS = 30_000


async def test_a_lost_claim_enqueues_nothing_and_a_won_one_enqueues_its_jobs(
    any_jobs: Jobs, clock: ManualClock
) -> None:
    driver = any_jobs.driver
    now = clock.now_ms()
    assert await driver.task_fire("t", None, [100], [request(1, run_at=now)]) is not None
    # A peer that read no state is stale: its claim is lost and its job goes nowhere.
    assert await driver.task_fire("t", None, [200], [request(2, run_at=now)]) is None
    state = await driver.task_state("t")
    assert state is not None and state.last_fired_at == 100
    both = [request(3, run_at=now), request(4, run_at=now)]
    won = await driver.task_fire("t", 100, [150, 200], both)
    assert won is not None and [r.deduped for r in won] == [False, False]
    state = await driver.task_state("t")
    assert state is not None and state.last_fired_at == 200
    assert await driver.task_unfinished("t") == []
    page = await driver.list_jobs(JobFilter(limit=10))
    assert sorted(j.id for j in page.jobs) == [request(n).id for n in (1, 3, 4)]


async def test_an_occurrence_with_no_jobs_is_still_claimed(any_jobs: Jobs) -> None:
    driver = any_jobs.driver
    assert await driver.task_fire("t", None, [100], []) == []
    assert await driver.task_fire("t", None, [100], []) is None
    state = await driver.task_state("t")
    assert state is not None and state.last_fired_at == 100


class Tick(BaseModel):
    at: int


async def test_a_firing_killed_after_its_jobs_went_in_enqueues_none_twice(
    any_jobs: Jobs, registry: JobRegistry, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    jobs = any_jobs
    if kind_of(jobs) != "nats":
        pytest.skip("claims and enqueues in one step: no moment between the two to die in")
    from engine.drivers.nats import scheduler as nats_scheduler

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
    first = Scheduler(jobs, holder="first", lease_ms=LEASE_MS)
    await first.round()
    clock.advance(MINUTE)
    occurrence = clock.now_ms()

    async def dies(*args: object) -> None:
        raise Killed()

    with monkeypatch.context() as patch:
        patch.setattr(nats_scheduler, "task_finished", dies)
        with pytest.raises(Killed):
            await first.round()
    assert await jobs.driver.task_unfinished("minutely") == [occurrence]
    second = Scheduler(jobs, holder="second", lease_ms=LEASE_MS)
    clock.advance(LEASE_MS)  # the dead holder's lease runs out, before the next occurrence
    (again,) = (await second.round()).fired
    assert again.occurrence_ms == occurrence and [r.deduped for r in again.results] == [True]
    assert await jobs.driver.task_unfinished("minutely") == []
    page = await jobs.list(name="tick", limit=10)
    assert [j.idempotency_key for j in page.jobs] == [f"task:minutely:{occurrence}"]
