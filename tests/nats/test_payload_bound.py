"""A NATS value holds at most the server's `max_payload` (1 MiB by default), and a job is one
value: a write that cannot fit is refused for good, typed and not retryable, never taken for
the server being away (which would be retried, and a settle held, without end)."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from engine import JobContext, JobRegistry, Jobs, ManualClock, Retry, Worker, job
from engine.errors import InvalidArgumentError
from schemas.jobs import JobRecord

pytest.importorskip("nats", reason="the nats extra is not installed")

# Within the engine's own input bound (1 MiB of JSON), past what one NATS value can hold.
NEAR_THE_BOUND = 1_048_400
# Past any lease and retry delay.
LATER_MS = 3_600_000


class Big(BaseModel):
    p: str
    n: int = 0


async def _run_twice(
    jobs: Jobs, job_id: str, clock: ManualClock, concurrency: int = 1
) -> JobRecord:
    """Run what is due, then again past any lease and retry delay; the job as it is then."""
    worker = Worker(jobs, concurrency=concurrency)
    with anyio.fail_after(60):
        await worker.run_until_idle()
        clock.advance(LATER_MS)
        await worker.run_until_idle()
    return await jobs.get(job_id)


async def test_an_input_the_store_cannot_hold_is_refused_naming_the_bound(
    jobs: Jobs, registry: JobRegistry
) -> None:
    @job(idempotency_key=lambda i: str(i.n), registry=registry)
    async def big(input: Big, ctx: JobContext) -> None:
        return None

    with anyio.fail_after(30), pytest.raises(InvalidArgumentError) as caught:
        await jobs.enqueue(big, {"p": "P" * NEAR_THE_BOUND})
    error = caught.value
    assert not error.retryable
    assert "max_payload" in error.cause and "README" in error.cause
    # The bound named is one an input can be stored at: a smaller input goes in.
    bound = error.details["bound"] if error.details else None
    assert isinstance(bound, int) and 900_000 < bound < NEAR_THE_BOUND
    filler = len('{"p":"","n":0}')
    result = await jobs.enqueue(big, {"p": "P" * (bound - filler), "n": 1})
    assert not result.deduped
    assert (await jobs.get(result.id)).state == "ready"


async def test_a_step_that_outgrows_the_value_fails_its_job_for_good(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    runs: list[int] = []

    @job(
        idempotency_key=lambda i: str(i.n),
        retry=Retry(attempts=2, backoff="fixed", base_delay=0.1),
        registry=registry,
    )
    async def grows(input: Big, ctx: JobContext) -> Any:
        runs.append(input.n)
        # Each step alone fits; together with the input they do not.
        await ctx.step.run("s1", lambda: "x" * 300_000)
        await ctx.step.run("s2", lambda: "y" * 300_000)
        return "never"

    record = await jobs.enqueue(grows, {"p": "P" * 500_000})
    after = await _run_twice(jobs, record.id, clock, concurrency=2)
    # As any output the store refuses: the same value would be refused at every attempt.
    assert (after.state, after.attempt) == ("failed", 1)
    assert after.last_error is not None and after.last_error.code == "JOB_OUTPUT_INVALID"
    assert "max_payload" in after.last_error.cause
    assert runs == [0]


async def test_an_output_that_outgrows_the_value_fails_the_job_for_good(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    @job(idempotency_key=lambda i: str(i.n), retry=Retry(attempts=3), registry=registry)
    async def answers(input: Big, ctx: JobContext) -> Any:
        return "z" * 700_000

    record = await jobs.enqueue(answers, {"p": "P" * 500_000})
    after = await _run_twice(jobs, record.id, clock)
    assert (after.state, after.attempt, after.output) == ("failed", 1, None)
    assert after.last_error is not None and after.last_error.code == "JOB_OUTPUT_INVALID"


async def test_an_error_too_long_for_the_value_is_stored_cut_and_the_job_dead_letters(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    @job(
        idempotency_key=lambda i: str(i.n),
        retry=Retry(attempts=2, backoff="fixed", base_delay=0.1),
        registry=registry,
    )
    async def raises(input: Big, ctx: JobContext) -> Any:
        raise RuntimeError("E" * 200_000)

    record = await jobs.enqueue(raises, {"p": "P" * 900_000})
    after = await _run_twice(jobs, record.id, clock)
    assert (after.state, after.attempt) == ("dead", 2)
    assert after.last_error is not None and after.last_error.cause.startswith("RuntimeError: EEE")
    assert len(after.last_error.cause) < 5_000  # cut: the whole of it did not fit
