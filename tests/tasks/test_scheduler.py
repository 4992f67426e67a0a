"""The scheduler on every driver: one leader, each occurrence fired once, catch-up by policy."""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from zoneinfo import ZoneInfo

import anyio
import pytest
from pydantic import BaseModel

from engine import Enqueue, JobContext, JobDefinition, JobRegistry, Jobs, ManualClock, Worker, job
from engine.tasks import CatchUp, Scheduler, SchedulerRound, describe_tasks, task
from engine.testing.blocked import wait_all_tasks_blocked
from tests.tasks.waiting import until_set

MINUTE = 60_000
HOUR = 60 * MINUTE
NEW_YORK = ZoneInfo("America/New_York")


class Ping(BaseModel):
    at: int


def declare_ping(registry: JobRegistry, ran: anyio.Event | None = None) -> JobDefinition[Ping]:
    @job(idempotency_key=lambda i: f"ping:{i.at}", registry=registry)
    async def ping(input: Ping, ctx: JobContext) -> None:
        if ran is not None:
            ran.set()

    return ping


async def keys(jobs: Jobs, name: str = "ping") -> list[str]:
    page = await jobs.list(name=name, limit=1000)
    return sorted(record.idempotency_key for record in page.jobs)


def fired(*rounds: SchedulerRound) -> list[int]:
    return [f.occurrence_ms for r in rounds for f in r.fired]


async def test_two_schedulers_racing_for_one_occurrence_enqueue_one_job(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    ping = declare_ping(registry)
    arrived = 0
    both_read_state = anyio.Event()

    async def entries(at: int) -> list[tuple[object, dict[str, int]]]:
        # Hold each scheduler here until both have read the durable state: neither can see the
        # other's claim yet, so only the claim's compare-and-set stands between them.
        nonlocal arrived
        arrived += 1
        if arrived == 2:
            both_read_state.set()
        with anyio.fail_after(10):
            await both_read_state.wait()
        return [(ping, {"at": at})]

    task(name="hourly", cron="0 * * * *", tz="UTC", enqueue=entries, registry=registry)
    one, two = Scheduler(jobs, holder="one"), Scheduler(jobs, holder="two")
    clock.advance(HOUR)
    occurrence = clock.now_ms()
    rounds: list[SchedulerRound] = []

    async def race(scheduler: Scheduler) -> None:
        rounds.append(await scheduler.fire_due())

    async with anyio.create_task_group() as tg:
        tg.start_soon(race, one)
        tg.start_soon(race, two)

    assert fired(*rounds) == [occurrence]  # the loser of the claim enqueues nothing
    results = [r for round_ in rounds for f in round_.fired for r in f.results]
    assert [r.deduped for r in results] == [False]
    assert await keys(jobs) == [f"task:hourly:{occurrence}"]
    state = await jobs.driver.task_state("hourly")
    assert state is not None and state.last_fired_at == occurrence


async def test_only_the_leader_fires_and_a_new_leader_takes_over_after_the_lease(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    ping = declare_ping(registry)
    task(
        name="every5",
        cron="*/5 * * * *",
        tz="UTC",
        enqueue=lambda at: [(ping, {"at": at})],
        catch_up="all",
        registry=registry,
    )
    start = clock.now_ms()  # 2026-01-01T00:00Z, itself an occurrence (not fired: it is the start)
    first = Scheduler(jobs, holder="first", lease_ms=10 * MINUTE)
    second = Scheduler(jobs, holder="second", lease_ms=10 * MINUTE)
    assert (await first.round()).leader
    assert not (await second.round()).leader

    clock.advance(5 * MINUTE)
    assert fired(await first.round()) == [start + 5 * MINUTE]
    assert fired(await second.round()) == []
    # `first` dies here without a word. Its lease runs until +15 min.
    clock.advance(5 * MINUTE)
    standby = await second.round()
    assert not standby.leader and fired(standby) == []
    clock.advance(6 * MINUTE)  # +16 min: the lease has expired
    takeover = await second.round()
    assert takeover.leader
    # It resumes from the durable state (+5 fired by `first`), not from its own start.
    assert fired(takeover) == [start + 10 * MINUTE, start + 15 * MINUTE]
    # The old leader comes back: it is not the leader any more and fires nothing.
    assert not (await first.round()).leader
    assert await keys(jobs) == sorted(f"task:every5:{start + k * 5 * MINUTE}" for k in (1, 2, 3))


@pytest.mark.parametrize(
    ("policy", "rounds_fired"),
    [("skip", [[10]]), ("all", [[1, 2, 3], [4, 5, 6], [7, 8, 9], [10]])],
)
async def test_catch_up_after_downtime_follows_the_policy_and_max_catch_up(
    jobs: Jobs,
    registry: JobRegistry,
    clock: ManualClock,
    policy: CatchUp,
    rounds_fired: list[list[int]],
) -> None:
    ping = declare_ping(registry)
    task(
        name="hourly",
        cron="0 * * * *",
        tz="UTC",
        enqueue=lambda at: [(ping, {"at": at})],
        catch_up=policy,
        max_catch_up=3,
        registry=registry,
    )
    start = clock.now_ms()
    scheduler = Scheduler(jobs, holder="only")
    assert fired(await scheduler.round()) == []
    clock.advance(10 * HOUR + 30 * MINUTE)  # ten occurrences missed
    seen: list[list[int]] = []
    for _ in range(len(rounds_fired)):
        report = await scheduler.round()
        assert len(report.fired) <= 3
        seen.append([(at - start) // HOUR for at in fired(report)])
    assert seen == rounds_fired
    assert fired(await scheduler.round()) == []  # caught up: nothing more until +11h
    expected = [f"task:hourly:{start + h * HOUR}" for hours in rounds_fired for h in hours]
    assert await keys(jobs) == sorted(expected)
    clock.advance(30 * MINUTE)
    assert fired(await scheduler.round()) == [start + 11 * HOUR]


async def test_a_task_seen_for_the_first_time_does_not_fire_its_past(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    ping = declare_ping(registry)
    task(
        name="hourly",
        cron="0 * * * *",
        tz="UTC",
        enqueue=lambda at: [(ping, {"at": at})],
        catch_up="all",
        registry=registry,
    )
    clock.advance(30 * MINUTE)
    scheduler = Scheduler(jobs, holder="late")
    assert fired(await scheduler.round()) == []
    assert await keys(jobs) == []


@pytest.mark.parametrize(
    ("day", "counts"),
    [
        # 30 2: the missing 02:30 fires at 03:30 EDT; 30 1: once; hourly: once per elapsed hour.
        ((2026, 3, 8), {"daily-0230": 1, "daily-0130": 1, "hourly": 23}),
        ((2026, 11, 1), {"daily-0230": 1, "daily-0130": 1, "hourly": 25}),
    ],
)
async def test_dst_days_fire_the_right_number_of_times(
    jobs: Jobs,
    registry: JobRegistry,
    clock: ManualClock,
    day: tuple[int, int, int],
    counts: dict[str, int],
) -> None:
    ping = declare_ping(registry)
    for name, cron in (("daily-0230", "30 2 * * *"), ("daily-0130", "30 1 * * *")):
        task(name=name, cron=cron, tz="America/New_York", enqueue=lambda at: [], registry=registry)
    task(
        name="hourly",
        cron="0 * * * *",
        tz="America/New_York",
        enqueue=lambda at: [(ping, {"at": at})],
        catch_up="all",
        registry=registry,
    )
    midnight = datetime(*day, tzinfo=NEW_YORK)
    clock.set(int(midnight.timestamp() * 1000) - 1)  # a millisecond before local midnight
    scheduler = Scheduler(jobs, holder="dst")
    seen: Counter[str] = Counter()
    local: list[str] = []
    end = int(datetime(day[0], day[1], day[2] + 1, tzinfo=NEW_YORK).timestamp() * 1000)
    while clock.now_ms() + 15 * MINUTE < end:
        clock.advance(15 * MINUTE)
        for f in (await scheduler.round()).fired:
            seen[f.task] += 1
            if f.task == "daily-0230":
                local.append(datetime.fromtimestamp(f.occurrence_ms / 1000, NEW_YORK).isoformat())
    assert dict(seen) == counts
    assert len(await keys(jobs)) == counts["hourly"]
    assert local == ["2026-03-08T03:30:00-04:00" if day[1] == 3 else "2026-11-01T02:30:00-05:00"]


async def test_one_occurrence_can_enqueue_several_jobs_and_tenants(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    ping = declare_ping(registry)
    task(
        name="fanout",
        cron="0 * * * *",
        tz="UTC",
        enqueue=lambda at: [
            (ping, {"at": 1}),
            (ping, {"at": 2}),  # same job, same tenant: kept apart by a repeat suffix
            (ping, {"at": 1}, "acme"),
            ("ping", {"at": 1}, "globex"),
        ],
        registry=registry,
    )
    scheduler = Scheduler(jobs, holder="only")
    clock.advance(HOUR)
    (occurrence,) = (await scheduler.round()).fired
    at = occurrence.occurrence_ms
    assert [r.deduped for r in occurrence.results] == [False] * 4
    page = await jobs.list(name="ping")
    assert sorted((j.tenant_id or "", j.idempotency_key) for j in page.jobs) == [
        ("", f"task:fanout:{at}"),
        ("", f"task:fanout:{at}#1"),
        ("acme", f"task:fanout:{at}"),
        ("globex", f"task:fanout:{at}"),
    ]


async def test_a_broken_task_does_not_stop_the_others_and_retries_next_round(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    ping = declare_ping(registry)
    broken = {"raise": True}

    def flaky(at: int) -> list[tuple[object, dict[str, int]]]:
        if broken["raise"]:
            raise RuntimeError("the database of the app is down")
        return [(ping, {"at": at})]

    task(name="flaky", cron="0 * * * *", tz="UTC", enqueue=flaky, registry=registry)
    task(
        name="bad-entries",
        cron="0 * * * *",
        tz="UTC",
        enqueue=lambda at: [("no_such_job", {})],
        registry=registry,
    )
    task(
        name="not-a-list",
        cron="0 * * * *",
        tz="UTC",
        enqueue=lambda at: "ping",
        registry=registry,
    )
    task(
        name="one-enqueue-not-in-a-list",  # an Enqueue is a tuple, yet not a list of entries
        cron="0 * * * *",
        tz="UTC",
        enqueue=lambda at: Enqueue(ping, {"at": at}),
        registry=registry,
    )
    task(
        name="healthy",
        cron="0 * * * *",
        tz="UTC",
        enqueue=lambda at: [(ping, {"at": at + 1})],
        registry=registry,
    )
    scheduler = Scheduler(jobs, holder="only")
    clock.advance(HOUR)
    report = await scheduler.round()
    assert [f.task for f in report.fired] == ["healthy"]
    assert {name: e.code for name, e in report.failed.items()} == {
        "flaky": "TASK_ENQUEUE_FAILED",
        "bad-entries": "JOB_UNKNOWN",
        "not-a-list": "TASK_ENTRY_INVALID",
        "one-enqueue-not-in-a-list": "TASK_ENTRY_INVALID",
    }
    state = await jobs.driver.task_state("flaky")  # not fired: only its failure is recorded
    assert state is not None and state.last_fired_at is None and state.failure is not None
    assert state.failure.error.code == "TASK_ENQUEUE_FAILED"
    broken["raise"] = False
    retry = await scheduler.round()
    assert [f.task for f in retry.fired] == ["flaky"]
    assert retry.fired[0].occurrence_ms == report.fired[0].occurrence_ms


async def test_describe_tasks_shows_schedule_next_occurrences_and_last_fired(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    ping = declare_ping(registry)
    task(
        name="nightly",
        cron="30 2 * * *",
        tz="America/New_York",
        enqueue=lambda at: [(ping, {"at": at})],
        description="the nightly digest",
        registry=registry,
    )
    clock.set(int(datetime(2026, 3, 6, 12, tzinfo=NEW_YORK).timestamp() * 1000))
    (described,) = await describe_tasks(jobs, count=3)
    assert described.name == "nightly" and described.timezone == "America/New_York"
    assert described.cron == "30 2 * * *" and described.catch_up == "skip"
    assert described.description == "the nightly digest" and described.last_fired is None
    assert [o.local for o in described.next_occurrences] == [
        "2026-03-07T02:30:00-05:00",
        "2026-03-08T03:30:00-04:00",  # spring forward: 02:30 does not exist that day
        "2026-03-09T02:30:00-04:00",
    ]
    scheduler = Scheduler(jobs, holder="only")
    clock.set(described.next_occurrences[0].at)
    await scheduler.round()
    (after,) = await describe_tasks(jobs, "nightly", count=1)
    assert after.last_fired is not None
    assert after.last_fired.local == "2026-03-07T02:30:00-05:00"
    with pytest.raises(Exception) as caught:
        await describe_tasks(jobs, "weekly")
    assert getattr(caught.value, "code", None) == "TASK_UNKNOWN"


async def test_the_worker_runs_the_scheduler_in_process_and_hands_the_lease_back_on_drain(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    ran = anyio.Event()
    ping = declare_ping(registry, ran)
    task(
        name="minutely",
        cron="* * * * *",
        tz="UTC",
        enqueue=lambda at: [(ping, {"at": at})],
        registry=registry,
    )
    worker = Worker(jobs, concurrency=1, outbox_relay=False)
    assert worker.scheduler is not None
    clock.advance(MINUTE)
    occurrence = clock.now_ms()
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(worker.run)
            await until_set(ran, clock, worker.poll_ms)
            await worker.drain()
    assert await keys(jobs) == [f"task:minutely:{occurrence}"]
    # Drained: the lease was handed back, so a peer leads at once rather than after 30 s.
    assert (await Scheduler(jobs, holder="peer").round()).leader


async def test_a_worker_with_the_scheduler_off_fires_nothing(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    ping = declare_ping(registry)
    task(
        name="minutely",
        cron="* * * * *",
        tz="UTC",
        enqueue=lambda at: [(ping, {"at": at})],
        registry=registry,
    )
    worker = Worker(jobs, scheduler=False, outbox_relay=False)
    assert worker.scheduler is None
    clock.advance(MINUTE)
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(worker.run)
            await wait_all_tasks_blocked()  # running and idle: a scheduler would have fired
            await worker.drain()
    assert await keys(jobs) == []
