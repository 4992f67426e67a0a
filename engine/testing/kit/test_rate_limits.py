"""Rate limits (engine/rate_limits.py): GCRA admits exactly N per period, all or nothing across
keys, shared by every process on one database; a job over its rate is shed like a cap (rule 7:
ready, attempt and queued_at unchanged, no error) until its next allowed start."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from engine import JobContext, JobRegistry, Jobs, Limits, ManualClock, Worker, job
from engine.drivers.base import RATES, RateStore, require
from engine.rate_limits import RateLimit, RateTake
from engine.testing.observe import Recorder


class Order(BaseModel):
    n: int
    customer: str = "c1"


@pytest.fixture(autouse=True)
def _offers_rates(jobs: Jobs) -> None:
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
    assert verdict == (("tenant:acme", now + 4000))
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
    assert second == ("job:shared", now + 500)
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
    await Worker(jobs, listeners=[recorder]).run_until_idle()
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
    await Worker(jobs, concurrency=1, limits=limits, listeners=[recorder]).run_until_idle()
    # acme's second is over its tenant rate; globex takes the queue's second start.
    assert ran == [0, 2]
    (shed,) = [e for e in recorder.events if e.kind == "shed"]
    assert (shed.reason or "").startswith("over rate tenant:acme:")
    clock.advance(1_000)
    # The queue's two starts are spent for 30 s: acme's tenant rate allows, the queue does not.
    await Worker(jobs, limits=limits, listeners=[recorder]).run_until_idle()
    assert len(ran) == 2
    assert (recorder.events[-1].reason or "").startswith("over rate queue:mail:")


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
