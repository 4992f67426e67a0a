"""Settled counts (engine/settled_counts.py): jobs settled at known clock times are counted
exactly in half-open intervals of `finished_at`, per queue and state, one tenant's when asked;
adjacent intervals never count a job twice; live and retried jobs are not counted."""

from __future__ import annotations

import pytest

from engine import Jobs, ManualClock
from engine.drivers.base import SETTLED, AckWrite, Driver
from engine.errors import JobsError
from schemas.errors import ErrorPayload
from schemas.jobs import EnqueueRequest, NackOptions
from schemas.states import JobState
from schemas.stats import SettledCount

_serial = 0


@pytest.fixture(autouse=True)
def offers_settled_counts(jobs: Jobs) -> None:
    # Optional capability (engine/drivers/base.py): a driver without it is not held to this.
    if not SETTLED.offered_by(jobs.driver):
        pytest.skip(f"the {jobs.driver.kind} driver counts no settled intervals")


def _request(queue: str, tenant: str | None, now: int) -> EnqueueRequest:
    global _serial
    _serial += 1
    return EnqueueRequest(
        id=f"sc{_serial:07d}",
        run_id=f"run{_serial:07d}",
        name="work",
        queue=queue,
        tenant_id=tenant,
        idempotency_key=f"sc{_serial}",
        input={"n": _serial},
        run_at=now,
        max_attempts=3,
    )


async def settle(
    driver: Driver, state: JobState, n: int = 1, *, queue: str = "alpha", tenant: str | None = None
) -> list[str]:
    """`n` jobs settled in `state` at the clock's now; done ones in one batch, as a worker acks."""
    now = driver.clock.now_ms()
    requests = [_request(queue, tenant, now) for _ in range(n)]
    await driver.enqueue(requests)
    ids = [r.id for r in requests]
    if state == "cancelled":
        for job_id in ids:
            await driver.cancel(job_id, None, "test")
        return ids
    claimed = await driver.claim("w", n, 60_000, [queue])
    assert sorted(c.record.id for c in claimed) == sorted(ids)
    if state == "done":
        outcomes = await driver.ack_many([AckWrite(c.record.id, c.token, None) for c in claimed])
        assert outcomes == [None] * n
        return ids
    error = ErrorPayload(code="JOB_FAILED", title="t", cause="boom", fix="fix", retryable=False)
    for c in claimed:
        options = NackOptions(error=error, dead_letter=state == "dead", fail=state == "failed")
        await driver.nack(c.record.id, c.token, options)
    return ids


async def counts(
    jobs: Jobs, since: int, until: int, tenant: str | None = None
) -> dict[str, SettledCount]:
    found = await jobs.settled_counts(since, until, tenant_id=tenant)
    assert found is not None
    return found


async def test_each_state_is_counted_per_queue_in_a_half_open_interval(
    jobs: Jobs, clock: ManualClock
) -> None:
    t0 = clock.now_ms()
    await settle(jobs.driver, "done", 3)
    clock.advance(1)
    await settle(jobs.driver, "failed")
    clock.advance(1)
    await settle(jobs.driver, "dead", 2, queue="beta")
    clock.advance(1)
    await settle(jobs.driver, "cancelled", queue="beta")
    clock.set(t0 + 10)  # exactly at the first interval's end: the next one's
    await settle(jobs.driver, "done", 4)

    assert await counts(jobs, t0, t0 + 10) == {
        "alpha": SettledCount(done=3, failed=1),
        "beta": SettledCount(dead=2, cancelled=1),
    }
    assert await counts(jobs, t0 + 10, t0 + 11) == {"alpha": SettledCount(done=4)}
    assert await counts(jobs, t0 + 1, t0 + 3) == {
        "alpha": SettledCount(failed=1),
        "beta": SettledCount(dead=2),
    }
    assert await counts(jobs, t0 + 10, t0 + 10) == {}  # empty interval
    assert await counts(jobs, t0 - 1000, t0) == {}  # ends where the first settled


async def test_adjacent_intervals_count_every_job_once(jobs: Jobs, clock: ManualClock) -> None:
    t0 = clock.now_ms()
    settled = 0
    for i in range(12):
        # Batches of several at one instant, some on the intervals' edges (every 5 ms).
        clock.set(t0 + i * 5 // 2)
        await settle(jobs.driver, "done", 1 + i % 4, queue=f"q{i % 2}")
        settled += 1 + i % 4
    end = clock.now_ms() + 1
    whole = await counts(jobs, t0, end)
    assert sum(c.total for c in whole.values()) == settled
    pieces: dict[str, int] = {}
    for since in range(t0, end, 5):
        for queue, c in (await counts(jobs, since, min(since + 5, end))).items():
            pieces[queue] = pieces.get(queue, 0) + c.done
    assert pieces == {queue: c.done for queue, c in whole.items()}


async def test_one_tenant_counts_only_its_own(jobs: Jobs, clock: ManualClock) -> None:
    t0 = clock.now_ms()
    await settle(jobs.driver, "done", 2, tenant="acme")
    await settle(jobs.driver, "done", 3, tenant="globex")
    await settle(jobs.driver, "failed", tenant="acme", queue="beta")
    await settle(jobs.driver, "done")  # no tenant
    end = t0 + 1
    assert await counts(jobs, t0, end, "acme") == {
        "alpha": SettledCount(done=2),
        "beta": SettledCount(failed=1),
    }
    assert await counts(jobs, t0, end, "globex") == {"alpha": SettledCount(done=3)}
    assert await counts(jobs, t0, end, "initech") == {}
    assert await counts(jobs, t0, end) == {
        "alpha": SettledCount(done=6),
        "beta": SettledCount(failed=1),
    }


async def test_live_and_retried_jobs_are_not_counted(jobs: Jobs, clock: ManualClock) -> None:
    t0 = clock.now_ms()
    (failed,) = await settle(jobs.driver, "failed")
    await jobs.driver.enqueue([_request("alpha", None, t0)])  # ready
    await jobs.driver.enqueue([_request("alpha", None, t0)])
    await jobs.driver.claim("w", 1, 60_000, ["alpha"])  # running
    assert await counts(jobs, t0, t0 + 1) == {"alpha": SettledCount(failed=1)}
    clock.advance(1)
    await jobs.driver.retry(failed, None, False, "test")  # live again: no longer settled
    assert await counts(jobs, t0, t0 + 2) == {}


async def test_an_interval_that_ends_before_it_starts_is_refused(
    jobs: Jobs, clock: ManualClock
) -> None:
    now = clock.now_ms()
    with pytest.raises(JobsError) as refused:
        await jobs.settled_counts(now, now - 1)
    assert refused.value.code == "INVALID_ARGUMENT"
