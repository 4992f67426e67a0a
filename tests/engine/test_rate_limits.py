"""engine.rate_limits: the GCRA arithmetic, the keys a start takes, and the declaration checks."""

from __future__ import annotations

from dataclasses import replace

from pydantic import BaseModel

from engine import JobContext, JobRegistry, job
from engine.metrics import WorkerMetrics
from engine.observe import WorkerEvent
from engine.rate_limits import (
    ADOPT_AFTER_MS,
    LATE_MIN_US,
    RateLimit,
    RateReservation,
    RateState,
    RateTake,
    RateVerdict,
    adoptable,
    gcra,
    interval_us,
    keys_of,
    late_window_ms,
    take_all,
    takes_for,
    tolerance_us,
    use_reservation,
)


class Order(BaseModel):
    customer: str


def test_the_interval_is_exact_to_the_microsecond() -> None:
    assert interval_us(3, 1000) == 333_333
    assert interval_us(50, 1000) == 20_000
    assert tolerance_us(10, 60_000, 4) == 3 * 6_000_000


def test_gcra_allows_at_its_boundary_and_not_a_microsecond_before() -> None:
    take = RateTake("job:a", 2, 1000, 1)
    now_us = 10_000_000
    assert gcra(None, now_us, take) == (True, now_us + 500_000, now_us)
    assert gcra(now_us, now_us, take)[0] is True
    assert gcra(now_us + 1, now_us, take) == (False, now_us + 500_001, now_us + 1)
    # A TAT long past does not bank starts: it counts from now.
    assert gcra(0, now_us, take) == (True, now_us + 500_000, now_us)


def test_take_all_names_the_key_that_holds_longest_and_rounds_up_to_a_ms() -> None:
    a, b = RateTake("job:a", 1, 1000, 1), RateTake("queue:q", 3, 1000, 1)
    verdict, new = take_all({"job:a": 10_500_000, "queue:q": 10_000_001}, [b, a], 10_000)
    assert verdict == RateVerdict("job:a", 10_500) and new == {}
    verdict, new = take_all({"queue:q": 10_000_001}, [b], 10_000)
    assert verdict == RateVerdict("queue:q", 10_001)
    verdict, new = take_all({}, [a, b], 10_000)
    assert verdict == RateVerdict(None, 10_000) and new == {
        "job:a": 11_000_000,
        "queue:q": 10_333_333,
    }


def test_a_reserving_take_moves_every_key_as_if_started_at_the_slot() -> None:
    fast, slow = RateTake("job:a", 4, 1000, 1), RateTake("tenant:t", 1, 1000, 1)
    now = 10_000
    # slow allows from now + 600 ms; fast (TAT 100 ms ahead) would allow sooner.
    tats = {fast.key: now * 1000 + 100_000, slow.key: now * 1000 + 600_000}
    assert take_all(tats, [fast, slow], now) == (RateVerdict("tenant:t", now + 600), {})
    verdict, new = take_all(tats, [fast, slow], now, reserve=True)
    assert verdict == RateVerdict("tenant:t", now + 600)
    # Both keys taken at the slot: GCRA at now + 600 ms, so the next reserver queues behind.
    assert new == {fast.key: (now + 600) * 1000 + 250_000, slow.key: (now + 1600) * 1000}
    assert take_all(new, [fast, slow], now, reserve=True)[0] == RateVerdict("tenant:t", now + 1600)
    # Allowed: a reserving take is a plain take.
    assert take_all({}, [fast], now, reserve=True) == take_all({}, [fast], now)


def test_a_reservation_starts_its_job_from_its_slot_until_it_is_late() -> None:
    held = RateReservation("j1", 5_000, 5_025, "job:a", "job:a")
    assert use_reservation(None, 5_000) is None
    assert use_reservation(held, 4_999) == RateVerdict("job:a", 5_000)
    assert use_reservation(held, 5_000) == RateVerdict(None, 5_000)
    assert use_reservation(held, 5_025) == RateVerdict(None, 5_025)
    assert use_reservation(held, 5_026) is None


def test_an_overdue_slot_is_adoptable_over_the_same_keys_only() -> None:
    keys = keys_of([RateTake("job:a", 1, 1000, 1), RateTake("tenant:t", 1, 1000, 1)])
    held = RateReservation("j1", 5_000, 5_100, "job:a", keys)
    assert not adoptable(held, keys, 5_000 + ADOPT_AFTER_MS - 1)
    assert adoptable(held, keys, 5_000 + ADOPT_AFTER_MS)
    assert adoptable(held, keys, 5_100) and not adoptable(held, keys, 5_101)
    assert not adoptable(held, "job:a", 5_000 + ADOPT_AFTER_MS)


def test_a_reservation_forgives_a_burst_and_an_interval_of_lateness() -> None:
    assert late_window_ms([RateTake("job:a", 1, 1000, 1)]) == 1_000
    assert late_window_ms([RateTake("job:a", 4, 1000, 3), RateTake("queue:q", 1, 600, 1)]) == 750
    # A fast rate still forgives a claim's pickup lag.
    assert late_window_ms([RateTake("job:a", 1000, 1000, 1)]) == LATE_MIN_US // 1000


def test_a_state_says_when_its_next_start_may_happen() -> None:
    state = RateState("job:a", 5_000_000, 4, 1000, 2)
    assert state.next_start_at(1_000) == 4_750
    assert state.next_start_at(9_000) == 9_000


def test_takes_for_sorts_keys_and_computes_the_customer_key() -> None:
    per_customer = RateLimit(10, per=60, key=lambda i: i.customer)
    takes = takes_for(
        "bill", per_customer, lambda: Order(customer="acme"), "q", RateLimit(5), "t1", RateLimit(2)
    )
    assert [t.key for t in takes] == ["job:bill:acme", "queue:q", "tenant:t1"]
    assert takes[0] == RateTake("job:bill:acme", 10, 60_000, 1)
    # No tenant, no tenant key; a key function that fails limits the whole job.
    broken = RateLimit(1, key=lambda i: i.missing)
    takes = takes_for("bill", broken, lambda: Order(customer="x"), "q", None, None, RateLimit(2))
    assert [t.key for t in takes] == ["job:bill"]


def test_describe_reads_as_a_rate() -> None:
    assert RateLimit(50).describe() == "50 per 1s"
    assert RateLimit(10, per=60, burst=5, key=str).describe() == "10 per 60s, burst 5, per key"
    info = RateLimit(10, per=0.5, burst=2).info()
    assert (info.limit, info.per_ms, info.burst, info.keyed) == (10, 500, 2, False)


def test_a_declared_rate_is_in_the_job_descriptor() -> None:
    @job(
        idempotency_key=lambda i: i.customer,
        rate_limit=RateLimit(10, per=60, burst=2, key=lambda i: i.customer),
        registry=JobRegistry(),
    )
    async def bill(input: Order, ctx: JobContext) -> None:
        return None

    described = bill.describe().rate_limit
    assert described is not None
    assert (described.limit, described.per_ms, described.burst, described.keyed) == (
        10,
        60_000,
        2,
        True,
    )


def test_rate_sheds_are_counted_by_the_kind_of_limit() -> None:
    metrics = WorkerMetrics()
    event = WorkerEvent(
        kind="shed", job_id="j", name="bill", queue="q", tenant_id=None, attempt=0, at=0,
        worker_id="w", cap_kind="rate",
    )  # fmt: skip
    metrics(replace(event, rate_kind="tenant"))
    metrics(replace(event, rate_kind="tenant"))
    metrics(replace(event, rate_kind="job"))
    sample = metrics.registry.get_sample_value
    labels = {"queue": "q", "name": "bill"}
    assert sample("mcp_jobs_jobs_rate_limited_total", {**labels, "limit": "tenant"}) == 2
    assert sample("mcp_jobs_jobs_rate_limited_total", {**labels, "limit": "job"}) == 1
    assert sample("mcp_jobs_jobs_shed_total", {**labels, "reason": "rate"}) == 3


def test_several_starts_are_taken_at_once_only_as_far_as_every_key_admits() -> None:
    now = 1_000
    wide = RateTake("job:w", 10, 1000, 8)  # 100 ms apart, a burst of 8
    narrow = RateTake("queue:q", 10, 1000, 3)
    verdict, new = take_all({}, [wide], now, up_to=5)
    assert verdict == (None, now, 4)
    assert new == {"job:w": now * 1000 + 5 * 100_000}
    verdict, new = take_all({}, [wide, narrow], now, up_to=5)
    assert verdict.spare == 2  # the narrower burst bounds the batch
    assert new["queue:q"] == now * 1000 + 3 * 100_000
    # What was taken at once leaves exactly the rest of the burst: one more, then a wait.
    later, _ = take_all(new, [wide], now, up_to=10)
    assert later.blocked_key is None and later.spare == 4
    assert take_all(new, [narrow], now)[0].blocked_key == "queue:q"
