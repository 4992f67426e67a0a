"""Rate limits (engine/rate_limits.py): GCRA admits exactly N per period, all or nothing across
keys, shared by every process on one database; a job over its rate is shed like a cap (rule 7:
ready, attempt and queued_at unchanged, no error) until the start its take reserved, and then
starts from that reservation without being shed again."""

from __future__ import annotations

import asyncio
from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from engine import JobContext, JobRegistry, Jobs, Limits, ManualClock, Worker, job
from engine.drivers.base import RATES, RateStore, require
from engine.observe import WorkerEvent
from engine.rate_limits import (
    ADOPT_AFTER_MS,
    IDLE_KEY_EXPIRY_MS,
    RateLimit,
    RateReservation,
    RateTake,
    RateVerdict,
    idle_before_us,
)
from engine.testing.observe import Recorder
from engine.worker_rates import SPARE_TTL_MS


class Order(BaseModel):
    n: int
    customer: str = "c1"


@pytest.fixture(autouse=True)
def offers_rates(jobs: Jobs) -> None:
    # Optional capability (engine/drivers/base.py): a driver without it is not held to this.
    if not RATES.offered_by(jobs.driver):
        pytest.skip(f"the {jobs.driver.kind} driver keeps no rate limits")


def _store(jobs: Jobs) -> RateStore:
    return require(jobs.driver, RATES)


async def test_gcra_admits_exactly_n_per_period(jobs: Jobs, clock: ManualClock) -> None:
    store = _store(jobs)
    take = [RateTake("job:send", 5, 1000, 1)]
    start = clock.now_ms()
    admitted: list[int] = []
    # Every 10 ms across three periods: exactly 5 per second, evenly spaced 200 ms apart.
    for step in range(300):
        now = start + step * 10
        verdict = await store.take_rates(take, now)
        if verdict.blocked_key is None:
            admitted.append(now - start)
        else:
            assert verdict.blocked_key == "job:send"
            assert verdict.next_start_at == start + 200 * len(admitted)
    assert admitted == [200 * i for i in range(15)]


async def test_burst_admits_that_many_at_once_then_the_rate(jobs: Jobs, clock: ManualClock) -> None:
    store, now = _store(jobs), clock.now_ms()
    take = [RateTake("queue:mail", 4, 1000, 3)]
    verdicts = [await store.take_rates(take, now) for _ in range(4)]
    assert [v.blocked_key for v in verdicts] == [None, None, None, "queue:mail"]
    assert verdicts[3].next_start_at == now + 250
    assert (await store.take_rates(take, now + 250)).blocked_key is None


async def test_a_take_is_all_or_nothing_across_its_keys(jobs: Jobs, clock: ManualClock) -> None:
    store, now = _store(jobs), clock.now_ms()
    job_key, tenant_key = RateTake("job:a", 1, 1000, 1), RateTake("tenant:acme", 1, 4000, 1)
    assert (await store.take_rates([tenant_key], now)).blocked_key is None
    verdict = await store.take_rates([job_key, tenant_key], now + 1)
    assert verdict == RateVerdict("tenant:acme", now + 4000)
    # The job key was not spent by the refused take: it still admits one now.
    assert (await store.take_rates([job_key], now + 1)).blocked_key is None
    assert (await store.take_rates([job_key], now + 2)).blocked_key == "job:a"
    states = {s.key: s for s in await store.rate_states(10)}
    assert set(states) == {"job:a", "tenant:acme"}
    assert states["tenant:acme"].next_start_at(now + 1) == now + 4000
    assert (states["job:a"].limit, states["job:a"].per_ms) == (1, 1000)


async def test_two_driver_instances_on_one_database_share_the_limit(
    jobs: Jobs, second_jobs: Jobs, clock: ManualClock
) -> None:
    other = second_jobs
    take, now = [RateTake("job:shared", 2, 1000, 1)], clock.now_ms()
    first = await _store(jobs).take_rates(take, now)
    second = await _store(other).take_rates(take, now)
    assert first.blocked_key is None
    assert second == RateVerdict("job:shared", now + 500)
    assert (await _store(other).take_rates(take, now + 500)).blocked_key is None
    assert (await _store(jobs).take_rates(take, now + 500)).blocked_key == "job:shared"


async def test_a_job_over_its_rate_is_shed_until_its_next_start(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    ran: list[int] = []

    @job(idempotency_key=lambda i: f"o:{i.n}", rate_limit=RateLimit(1, per=60), registry=registry)
    async def limited(input: Order, ctx: JobContext) -> None:
        ran.append(input.n)

    await jobs.enqueue(limited, {"n": 1})
    second = await jobs.enqueue(limited, {"n": 2})
    before = await jobs.get(second.id)
    start = clock.now_ms()
    recorder = Recorder()
    # One at a time: the first in line takes the start (two at once race for it).
    await Worker(jobs, concurrency=1, listeners=[recorder]).run_until_idle()
    assert ran == [1]
    held = await jobs.get(second.id)
    # Shed, not failed: ready, no attempt, no error, its place in line kept, due at its start.
    assert (held.state, held.attempt, held.last_error) == ("ready", 0, None)
    assert held.queued_at == before.queued_at and held.run_at == start + 60_000
    (shed,) = [e for e in recorder.events if e.kind == "shed"]
    assert shed.cap_kind == "rate" and "job:limited" in (shed.reason or "")
    assert str(start + 60_000) in (shed.reason or "")
    (stats,) = await jobs.stats()
    assert stats.ready == 1
    clock.advance(60_000)
    await Worker(jobs).run_until_idle()
    assert ran == [1, 2]


async def test_computed_keys_are_limited_independently(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    ran: list[tuple[str, int]] = []
    per_customer = RateLimit(1, per=60, key=lambda i: i.customer)

    @job(idempotency_key=lambda i: f"o:{i.n}", rate_limit=per_customer, registry=registry)
    async def bill(input: Order, ctx: JobContext) -> None:
        ran.append((input.customer, input.n))

    for n, customer in enumerate(["acme", "acme", "globex"]):
        await jobs.enqueue(bill, {"n": n, "customer": customer})
    recorder = Recorder()
    await Worker(jobs, listeners=[recorder]).run_until_idle()
    # The two acme jobs start together: whichever takes first runs, the other is shed.
    assert sorted(customer for customer, _ in ran) == ["acme", "globex"]
    (shed,) = [e for e in recorder.events if e.kind == "shed"]
    assert (shed.reason or "").startswith("over rate job:bill:acme:")
    keys = {s.key for s in await _store(jobs).rate_states(10)}
    assert keys == {"job:bill:acme", "job:bill:globex"}


async def test_queue_and_tenant_rates_from_worker_limits(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    ran: list[int] = []

    @job(idempotency_key=lambda i: f"o:{i.n}", queue="mail", registry=registry)
    async def send(input: Order, ctx: JobContext) -> None:
        ran.append(input.n)

    for n, tenant in enumerate(["acme", "acme", "globex"]):
        await jobs.enqueue(send, {"n": n}, tenant_id=tenant)
    mail = RateLimit(2, per=60, burst=2)
    limits = Limits(rate_per_queue={"mail": mail}, rate_per_tenant=RateLimit(1))
    recorder = Recorder()
    # One at a time, in line: which key holds a job back depends on the starts before it.
    start = clock.now_ms()
    await Worker(jobs, concurrency=1, limits=limits, listeners=[recorder]).run_until_idle()
    # acme's second is over its tenant rate: it reserves its start in 1 s under the tenant AND
    # the queue, so the queue's second start is spoken for and globex waits for the third.
    assert ran == [0]
    sheds = [e.reason or "" for e in recorder.events if e.kind == "shed"]
    assert sheds[0].startswith(f"over rate tenant:acme: next start at {start + 1_000}")
    assert sheds[1].startswith(f"over rate queue:mail: next start at {start + 30_000}")
    clock.advance(1_000)
    await Worker(jobs, limits=limits, listeners=[recorder]).run_until_idle()
    assert ran == [0, 1]  # started from its reservation, nothing shed again
    clock.advance(29_000)
    await Worker(jobs, limits=limits, listeners=[recorder]).run_until_idle()
    assert ran == [0, 1, 2]
    assert len([e for e in recorder.events if e.kind == "shed"]) == 2
    assert await _store(jobs).rate_reservations(10) == []


async def test_a_backlog_is_claimed_at_most_twice_each_and_starts_a_second_apart(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    started: dict[int, int] = {}

    @job(idempotency_key=lambda i: f"o:{i.n}", rate_limit=RateLimit(1), registry=registry)
    async def paced(input: Order, ctx: JobContext) -> None:
        started[input.n] = clock.now_ms()

    for n in range(10):
        await jobs.enqueue(paced, {"n": n})
    start = clock.now_ms()
    recorder = Recorder()
    worker = Worker(jobs, listeners=[recorder])
    await worker.run_until_idle()
    # One starts; the nine others each reserved their own second and went back until then.
    assert len(started) == 1
    slots = [r.slot_at for r in await _store(jobs).rate_reservations(20)]
    assert slots == [start + 1_000 * i for i in range(1, 10)]
    for _ in range(9):
        clock.advance(1_000)
        await worker.run_until_idle()
    assert sorted(started.values()) == [start + 1_000 * i for i in range(10)]
    # A claim ends in a start (`claimed`, emitted as the job runs) or a shed: twice at most.
    claims: dict[str, int] = {}
    for event in recorder.events:
        if event.kind in ("claimed", "shed"):
            claims[event.job_id] = claims.get(event.job_id, 0) + 1
    assert len(claims) == 10 and sorted(claims.values()) == [1] + [2] * 9
    assert await _store(jobs).rate_reservations(20) == []


async def test_a_reservation_whose_job_never_comes_back_expires(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    @job(idempotency_key=lambda i: f"o:{i.n}", rate_limit=RateLimit(1, per=60), registry=registry)
    async def slow(input: Order, ctx: JobContext) -> None:
        return None

    await jobs.enqueue(slow, {"n": 1})
    held = await jobs.enqueue(slow, {"n": 2})
    start = clock.now_ms()
    await Worker(jobs, concurrency=1).run_until_idle()
    store = _store(jobs)
    # Good for one interval after its slot (burst 1: no tolerance).
    assert await store.rate_reservations(10) == [
        RateReservation(held.id, start + 60_000, start + 120_000, "job:slow", "job:slow")
    ]
    await jobs.cancel(held.id)
    # Its slot is lost (the next start comes after it); its row goes with the next take once void.
    take = [RateTake("job:slow", 1, 60_000, 1)]
    clock.advance(120_000)
    assert len(await store.rate_reservations(10)) == 1
    clock.advance(1)
    assert (await store.take_rates(take, clock.now_ms())).blocked_key is None
    assert await store.rate_reservations(10) == []


async def test_a_job_back_later_than_its_reservation_takes_afresh(
    jobs: Jobs, clock: ManualClock
) -> None:
    store, now = _store(jobs), clock.now_ms()
    take = [RateTake("job:late", 1, 1000, 1)]
    assert (await store.take_rates(take, now, "a")).blocked_key is None
    assert await store.take_rates(take, now, "b") == RateVerdict("job:late", now + 1_000)
    assert await store.take_rates(take, now, "c") == RateVerdict("job:late", now + 2_000)
    # b comes back after its late_at (now + 2 s), when c's slot is due: starting b too would
    # bunch two starts; it reserves again behind c instead.
    clock.advance(2_001)
    assert await store.take_rates(take, now + 2_001, "b") == RateVerdict("job:late", now + 3_000)
    assert await store.take_rates(take, now + 2_001, "c") == RateVerdict(None, now + 2_001)
    assert [(r.job_id, r.slot_at) for r in await store.rate_reservations(10)] == [
        ("b", now + 3_000)
    ]


async def test_a_fresh_take_adopts_an_overdue_slot_over_the_same_keys(
    jobs: Jobs, clock: ManualClock
) -> None:
    store, now = _store(jobs), clock.now_ms()
    take = [RateTake("job:busy", 1, 1000, 1)]
    assert (await store.take_rates(take, now, "a")).blocked_key is None
    assert await store.take_rates(take, now, "b") == RateVerdict("job:busy", now + 1_000)
    # b is 50 ms late for its slot (still in its window): x, over the same keys, starts on it.
    late = now + 1_000 + ADOPT_AFTER_MS
    other = [RateTake("job:other", 1, 1000, 1)]
    assert (await store.take_rates(other, late, "y")).blocked_key is None  # other keys: no
    assert await store.take_rates(take, late, "x") == RateVerdict(None, late)
    assert await store.rate_reservations(10) == []
    # b, back at last, reserves again behind the TAT (nothing started twice on one slot).
    assert await store.take_rates(take, late, "b") == RateVerdict("job:busy", now + 2_000)


async def test_two_driver_instances_share_reservations(
    jobs: Jobs, second_jobs: Jobs, clock: ManualClock
) -> None:
    take, now = [RateTake("job:shared", 1, 1000, 1)], clock.now_ms()
    one, two = _store(jobs), _store(second_jobs)
    assert (await one.take_rates(take, now, "a")).blocked_key is None
    assert await one.take_rates(take, now, "b") == RateVerdict("job:shared", now + 1_000)
    assert await two.take_rates(take, now, "c") == RateVerdict("job:shared", now + 2_000)
    # b's start is reserved on the other instance: it starts at its slot, c still waits.
    assert await two.take_rates(take, now + 1_000, "b") == RateVerdict(None, now + 1_000)
    assert await one.take_rates(take, now + 1_000, "c") == RateVerdict("job:shared", now + 2_000)
    assert [r.job_id for r in await two.rate_reservations(10)] == ["c"]


async def test_a_running_worker_wakes_at_a_reserved_start_not_at_its_next_poll(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    started: list[int] = []
    ran = [asyncio.Event() for _ in range(3)]
    both_shed = asyncio.Event()

    @job(idempotency_key=lambda i: f"o:{i.n}", rate_limit=RateLimit(1), registry=registry)
    async def paced(input: Order, ctx: JobContext) -> None:
        started.append(clock.now_ms())
        ran[len(started) - 1].set()

    def count_sheds(event: WorkerEvent) -> None:
        if event.kind == "shed":
            sheds.append(event.job_id)
        if len(sheds) == 2:
            both_shed.set()

    sheds: list[str] = []
    for n in range(3):
        await jobs.enqueue(paced, {"n": n})
    start = clock.now_ms()
    # An hour between polls: only the reserved-start timer can start the next two.
    worker = Worker(jobs, poll_ms=3_600_000, listeners=[count_sheds])
    await worker.start()
    try:
        with anyio.fail_after(10):
            await ran[0].wait()
            await both_shed.wait()
            for n in (1, 2):
                clock.advance(1_000)
                await ran[n].wait()
    finally:
        await worker.drain()
    assert started == [start, start + 1_000, start + 2_000]


def test_a_rate_limit_refuses_nonsense_at_declaration() -> None:
    from engine.errors import JobsError

    for bad in (
        {"limit": 0},
        {"limit": True},
        {"limit": 5, "per": 0},
        {"limit": 5, "per": float("nan")},
        {"limit": 5, "burst": 6},
        {"limit": 5, "burst": 0},
    ):
        with pytest.raises(JobsError) as raised:
            RateLimit(**bad)
        assert raised.value.code == "INVALID_ARGUMENT"
    with pytest.raises(JobsError) as raised:
        Limits(rate_per_queue={"q": RateLimit(1, key=lambda i: i)})
    assert raised.value.code == "INVALID_ARGUMENT"
    with pytest.raises(JobsError) as raised:

        @job(idempotency_key=lambda i: "k", rate_limit=5, registry=JobRegistry())  # type: ignore[arg-type]
        async def bad(input: Order, ctx: JobContext) -> None:
            return None

    assert raised.value.code == "JOB_DECLARATION_INVALID"


async def test_a_wave_of_starts_takes_the_rate_once_for_several_jobs(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A take asks for up to a quarter of the burst (SPARES_MAX at most) at once; the jobs of a
    claimed wave start on those spares instead of each taking the keys' rows in turn. What was
    taken is counted in the stored TAT, so the limit holds."""
    ran: list[int] = []

    @job(
        idempotency_key=lambda i: f"w:{i.n}",
        rate_limit=RateLimit(1000, per=1, burst=64),
        registry=registry,
    )
    async def quick(input: Order, ctx: JobContext) -> None:
        ran.append(input.n)

    for n in range(20):
        await jobs.enqueue(quick, {"n": n})
    store = _store(jobs)
    calls: list[int] = []
    take = store.take_rates

    async def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return await take(*args, **kwargs)

    monkeypatch.setattr(store, "take_rates", counted)
    worker = Worker(jobs, concurrency=20)
    await worker.run_until_idle()
    assert sorted(ran) == list(range(20))
    assert len(calls) == 2  # 16 starts, then 16 more for the last 4
    (state,) = await store.rate_states(10)
    assert state.tat == clock.now_ms() * 1000 + 32 * 1000  # every start taken, used or not

    await jobs.enqueue(quick, {"n": 20})  # within SPARE_TTL_MS: a spare starts it
    await worker.run_until_idle()
    assert len(calls) == 2 and ran[-1] == 20
    clock.advance(SPARE_TTL_MS + 1)  # older spares are dropped: the next job takes afresh
    await jobs.enqueue(quick, {"n": 21})
    await worker.run_until_idle()
    assert len(calls) == 3 and ran[-1] == 21


async def test_stored_keys_are_read_a_kind_at_a_time(jobs: Jobs, clock: ManualClock) -> None:
    """`rate_states(limit, prefix)`: only keys that start with the prefix, by key, up to the
    limit, whatever the other kinds hold; a prefix ending in any character bounds its range."""
    store, now = _store(jobs), clock.now_ms()
    keys = [
        *(f"job:send:c{n}" for n in range(5)),
        "job:send",
        "job:sené",
        "queue:mail",
        "queue:mail2",
        "tenant:acme",
        "tenant:acme-2",
        "tenant:b",
        "tenant:\U0010ffff",
    ]
    for key in keys:
        await store.take_rates([RateTake(key, 5, 1000, 5)], now)
    assert [s.key for s in await store.rate_states(3, "job:")] == sorted(keys)[:3]
    assert [s.key for s in await store.rate_states(100, "job:send:")] == [
        f"job:send:c{n}" for n in range(5)
    ]
    assert [s.key for s in await store.rate_states(100, "job:sené")] == ["job:sené"]
    assert [s.key for s in await store.rate_states(100, "queue:")] == ["queue:mail", "queue:mail2"]
    assert [s.key for s in await store.rate_states(100, "tenant:acme")] == [
        "tenant:acme",
        "tenant:acme-2",
    ]
    assert [s.key for s in await store.rate_states(100, "tenant:\U0010ffff")] == [
        "tenant:\U0010ffff"
    ]
    assert [s.key for s in await store.rate_states(100, "nothing:")] == []
    assert [s.key for s in await store.rate_states(100)] == sorted(keys)


async def test_idle_keys_are_forgotten_and_a_take_decides_as_before(
    jobs: Jobs, clock: ManualClock
) -> None:
    """A key whose TAT is older than the bound goes (a batch at most); a newer one and the
    reservations stay; a take under a forgotten key decides as it did with the key stored."""
    store, start = _store(jobs), clock.now_ms()
    for n in range(5):
        await store.take_rates([RateTake(f"job:old:{n}", 2, 1000, 1)], start)
    later = start + IDLE_KEY_EXPIRY_MS + 1_000
    await store.take_rates([RateTake("queue:busy", 1, 60_000, 1)], later)
    held = await store.take_rates([RateTake("queue:busy", 1, 60_000, 1)], later, job_id="j1")
    assert held.blocked_key == "queue:busy"
    # What a take under an old key answers with it stored, to compare after it is forgotten.
    kept = await store.take_rates([RateTake("job:old:0", 2, 1000, 1)], later)
    assert await store.forget_idle_rates(idle_before_us(later), 2) == 2
    assert await store.forget_idle_rates(idle_before_us(later), 10) == 2
    assert await store.forget_idle_rates(idle_before_us(later), 10) == 0
    assert [s.key for s in await store.rate_states(10)] == ["job:old:0", "queue:busy"]
    assert [r.job_id for r in await store.rate_reservations(10)] == ["j1"]
    # A day after it, job:old:0 is idle too; queue:busy's reservation moved its TAT 120 s on.
    day_later = idle_before_us(later + IDLE_KEY_EXPIRY_MS + 61_000)
    assert await store.forget_idle_rates(day_later, 10) == 1
    assert [s.key for s in await store.rate_states(10)] == ["queue:busy"]
    assert await store.take_rates([RateTake("job:old:1", 2, 1000, 1)], later) == kept


async def test_the_pruner_forgets_keys_no_start_took_for_a_day(
    jobs: Jobs, clock: ManualClock
) -> None:
    from engine.pruner import Pruner

    store, now = _store(jobs), clock.now_ms()
    for n in range(7):
        await store.take_rates([RateTake(f"job:send:c{n}", 1, 1000, 1)], now)
    clock.advance(IDLE_KEY_EXPIRY_MS // 2)
    await store.take_rates([RateTake("job:send:c0", 1, 1000, 1)], clock.now_ms())
    pruner = Pruner(jobs, holder="w1", batch_size=2, pause_ms=0, environ={})
    await pruner.pass_once()
    assert len(await store.rate_states(10)) == 7
    clock.advance(IDLE_KEY_EXPIRY_MS // 2 + 5_000)  # past the TATs of c1..c6 (start + 1 s)
    await pruner.pass_once()
    assert [s.key for s in await store.rate_states(10)] == ["job:send:c0"]
