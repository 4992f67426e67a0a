"""A task that cannot fire keeps its failure in its durable state (`task_failure`), so that
describe and diagnose, in other processes than the scheduler's, can show it; the task's next
claim clears it."""

from __future__ import annotations

from pydantic import BaseModel

from engine import JobContext, JobRegistry, Jobs, ManualClock, job
from engine.tasks import Scheduler, describe_tasks, task
from schemas.errors import ErrorPayload
from schemas.scheduler import TaskFailure

MINUTE = 60_000


class Tick(BaseModel):
    at: int


def _failure(code: str, since: int, at: int, rounds: int) -> TaskFailure:
    error = ErrorPayload(code=code, title="t", cause="c", fix="f", retryable=False)
    return TaskFailure(error=error, since=since, last_failed_at=at, rounds=rounds)


async def test_a_failure_is_stored_beside_the_last_fired_occurrence_and_a_claim_clears_it(
    jobs: Jobs, clock: ManualClock
) -> None:
    driver = jobs.driver
    now = clock.now_ms()
    await driver.task_failure("t", _failure("JOB_UNKNOWN", now, now, 1))
    state = await driver.task_state("t")
    # A task that never fired: the failure alone, and the claim from no state still wins.
    assert state is not None and state.last_fired_at is None
    assert state.failure == _failure("JOB_UNKNOWN", now, now, 1)
    assert await driver.task_claim("t", None, 100)
    state = await driver.task_state("t")
    assert state is not None and (state.last_fired_at, state.failure) == (100, None)
    clock.advance(1_000)
    later = _failure("TASK_ENTRY_INVALID", now, clock.now_ms(), 2)
    await driver.task_failure("t", later)
    state = await driver.task_state("t")
    assert state is not None and (state.last_fired_at, state.failure) == (100, later)
    assert not await driver.task_claim("t", None, 200)  # the failure is not a claim's value
    state = await driver.task_state("t")
    assert state is not None and state.failure == later
    assert await driver.task_claim("t", 100, 200)
    state = await driver.task_state("t")
    assert state is not None and (state.last_fired_at, state.failure) == (200, None)
    assert await driver.task_state("other") is None  # each task has its own state


async def test_a_task_naming_a_gone_job_is_failing_in_its_state_until_it_fires_again(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    @job(idempotency_key=lambda i: f"tick:{i.at}", registry=registry)
    async def tick(input: Tick, ctx: JobContext) -> None:
        pass

    named = {"job": "gone_job"}
    task(
        name="orphan",
        cron="* * * * *",
        tz="UTC",
        enqueue=lambda at: [(named["job"], {"at": at})],
        registry=registry,
    )
    scheduler = Scheduler(jobs, holder="only")
    clock.advance(MINUTE)
    occurrence = clock.now_ms()
    assert (await scheduler.round()).failed["orphan"].code == "JOB_UNKNOWN"
    state = await jobs.driver.task_state("orphan")
    assert state is not None and state.last_fired_at is None and state.failure is not None
    first = state.failure
    assert (first.error.code, first.since, first.last_failed_at, first.rounds) == (
        "JOB_UNKNOWN",
        occurrence,
        occurrence,
        1,
    )
    assert "gone_job" in first.error.cause and first.error.fix

    clock.advance(10_000)
    assert "orphan" in (await scheduler.round()).failed
    state = await jobs.driver.task_state("orphan")
    assert state is not None and state.failure is not None
    assert (state.failure.since, state.failure.last_failed_at, state.failure.rounds) == (
        occurrence,
        clock.now_ms(),
        2,
    )
    (described,) = await describe_tasks(jobs, "orphan")
    assert described.failing is not None and described.failing.error.code == "JOB_UNKNOWN"
    assert described.failing.since == occurrence and described.failing.rounds == 2

    named["job"] = tick.name  # the declaration mended (a deploy): the task fires again
    clock.advance(10_000)
    assert [f.occurrence_ms for f in (await scheduler.round()).fired] == [occurrence]
    state = await jobs.driver.task_state("orphan")
    assert state is not None and (state.last_fired_at, state.failure) == (occurrence, None)
    (described,) = await describe_tasks(jobs, "orphan")
    assert described.failing is None
