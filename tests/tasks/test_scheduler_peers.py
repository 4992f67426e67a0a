"""Schedulers that declare different tasks share one database: every declared task fires, each
occurrence once, whichever process declares it (other apps, a rolling deploy)."""

from __future__ import annotations

import anyio
from pydantic import BaseModel

from engine import JobContext, JobRegistry, Jobs, ManualClock, Worker, job
from engine.tasks import Scheduler, SchedulerRound, task, tasks_of

MINUTE = 60_000


class Tick(BaseModel):
    at: int


def fired(*rounds: SchedulerRound) -> list[tuple[str, int]]:
    return [(f.task, f.occurrence_ms) for r in rounds for f in r.fired]


async def keys(jobs: Jobs) -> list[str]:
    page = await jobs.list(limit=1000)
    return sorted(record.idempotency_key for record in page.jobs)


def declare_tick(registry: JobRegistry, runs: list[int] | None = None) -> None:
    @job(idempotency_key=lambda i: f"tick:{i.at}", registry=registry)
    async def tick(input: Tick, ctx: JobContext) -> None:
        if runs is not None:
            runs.append(input.at)


async def test_each_process_fires_the_tasks_only_it_declares(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    declare_tick(registry)
    # Two apps (two `--app` modules) on one database: each declares a task the other lacks.
    app_a, app_b = JobRegistry(), JobRegistry()
    for app, name in ((app_a, "a-minute"), (app_b, "b-minute")):
        task(
            name=name,
            cron="* * * * *",
            tz="UTC",
            enqueue=lambda at: [("tick", {"at": at})],
            registry=app,
        )
    a = Scheduler(jobs, tasks=tasks_of(app_a), holder="a")
    b = Scheduler(jobs, tasks=tasks_of(app_b), holder="b")
    await a.round()
    await b.round()
    clock.advance(MINUTE)
    occurrence = clock.now_ms()
    rounds = [await a.round(), await b.round()]
    assert sorted(fired(*rounds)) == [("a-minute", occurrence), ("b-minute", occurrence)]
    assert await keys(jobs) == [f"task:a-minute:{occurrence}", f"task:b-minute:{occurrence}"]


async def test_a_task_declared_by_old_and_new_versions_fires_once_per_occurrence(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    declare_tick(registry)
    # A rolling deploy: the new version adds "added"; both versions declare "kept".
    old, new = JobRegistry(), JobRegistry()
    for app, names in ((old, ("kept",)), (new, ("kept", "added"))):
        for name in names:
            task(
                name=name,
                cron="* * * * *",
                tz="UTC",
                enqueue=lambda at: [("tick", {"at": at})],
                registry=app,
            )
    schedulers = [
        Scheduler(jobs, tasks=tasks_of(old), holder="old", lease_ms=2 * MINUTE),
        Scheduler(jobs, tasks=tasks_of(new), holder="new", lease_ms=2 * MINUTE),
    ]
    start = clock.now_ms()
    seen: list[tuple[str, int]] = []
    for _ in range(5):
        for scheduler in schedulers:  # the old version rounds first: it would lead
            seen += fired(await scheduler.round())
        clock.advance(MINUTE)
    expected = [(name, start + k * MINUTE) for name in ("added", "kept") for k in range(1, 5)]
    assert sorted(seen) == expected
    assert len(await keys(jobs)) == len(expected)


async def test_an_enqueue_that_outlasts_the_lease_does_not_fire_the_occurrence_again(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    runs: list[int] = []
    declare_tick(registry, runs)
    late: list[Scheduler] = []
    late_round: list[SchedulerRound] = []

    async def slow(at: int) -> list[tuple[str, dict[str, int]]]:
        # Scheduler A is stuck here past its lease (slow app code, a blocked loop): B takes
        # over, fires the same occurrence, and a worker finishes that job before A goes on.
        if late:
            clock.advance(5_000)
            late_round.append(await late.pop().round())
            await Worker(jobs, scheduler=False, prune=False).run_until_idle()
        return [("tick", {"at": at})]

    task(name="minutely", cron="* * * * *", tz="UTC", enqueue=slow, registry=registry)
    a = Scheduler(jobs, holder="A", lease_ms=2_000)
    b = Scheduler(jobs, holder="B", lease_ms=2_000)
    await a.round()
    clock.advance(MINUTE)
    occurrence = clock.now_ms()
    late.append(b)
    with anyio.fail_after(10):
        stuck = await a.round()
    assert fired(*late_round) == [("minutely", occurrence)]
    assert fired(stuck) == []  # A lost the occurrence to B: it enqueues nothing
    await Worker(jobs, scheduler=False, prune=False).run_until_idle()
    assert runs == [occurrence]
