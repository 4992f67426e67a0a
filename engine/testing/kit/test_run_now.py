"""Retrying a delayed job runs it now (rules.retry_transition): it keeps its attempt count, since
`Retry(attempts)` counts every run and running early is no new budget; else an agent that follows
diagnose's RETRIES_WAITING fix after each failure would keep a job alive for ever. Retrying a
failed or dead job still starts its attempts again from 0, as documented."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from engine import JobContext, JobRegistry, Jobs, ManualClock, job
from schemas.jobs import NackOptions

LEASE_MS = 60_000
HOUR_MS = 3_600_000


class Item(BaseModel):
    n: int


@pytest.fixture(autouse=True)
def declared_jobs(registry: JobRegistry) -> None:
    @job(idempotency_key=lambda i: f"k{i.n}", registry=registry)
    async def flaky(input: Item, ctx: JobContext) -> None:
        return None


async def _fail_once(jobs: Jobs, delay_ms: int = HOUR_MS, *, dead: bool = False) -> None:
    (claimed,) = await jobs.driver.claim("w1", 1, LEASE_MS)
    await jobs.driver.nack(
        claimed.record.id, claimed.token, NackOptions(delay_ms=delay_ms, dead_letter=dead)
    )


async def test_running_a_delayed_retry_now_keeps_its_attempt_count(
    jobs: Jobs, clock: ManualClock
) -> None:
    result = await jobs.enqueue("flaky", {"n": 1})
    await _fail_once(jobs)
    waiting = await jobs.get(result.id)
    assert (waiting.state, waiting.attempt) == ("delayed", 1)
    clock.advance(1_000)
    now = await jobs.retry(result.id)
    assert (now.state, now.attempt, now.run_at) == ("ready", 1, clock.now_ms())
    stored = await jobs.get(result.id)
    assert (stored.state, stored.attempt, stored.queued_at) == ("ready", 1, clock.now_ms())
    await _fail_once(jobs)
    assert (await jobs.get(result.id)).attempt == 2  # two runs counted, not one


async def test_retrying_a_dead_job_still_starts_its_attempts_again(
    jobs: Jobs, clock: ManualClock
) -> None:
    result = await jobs.enqueue("flaky", {"n": 2})
    await _fail_once(jobs, 0, dead=True)
    assert (await jobs.get(result.id)).state == "dead"
    again = await jobs.retry(result.id)
    assert (again.state, again.attempt) == ("ready", 0)
    assert (await jobs.get(result.id)).attempt == 0


async def test_a_delayed_job_never_run_stays_at_attempt_zero(
    jobs: Jobs, clock: ManualClock
) -> None:
    result = await jobs.enqueue("flaky", {"n": 3}, delay=3600)
    now = await jobs.retry(result.id)
    assert (now.state, now.attempt) == ("ready", 0)
