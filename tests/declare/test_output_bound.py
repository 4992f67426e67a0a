"""A job's output and a step's result are bounded as its input is (engine.bounds: the one
setting, MCP_JOBS_MAX_PAYLOAD_BYTES, 1 MiB by default): a larger one fails that job at once,
JOB_OUTPUT_INVALID naming the job and the size, not retried, and nothing of it stored."""

from __future__ import annotations

import anyio
import pytest
from pydantic import BaseModel

from engine import JobContext, JobRegistry, Jobs, Retry, Worker, job
from engine.bounds import PAYLOAD_ENV

BOUND = 2_000


class Blob(BaseModel):
    size: int


@pytest.fixture(autouse=True)
def _small_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PAYLOAD_ENV, str(BOUND))


def _declare(registry: JobRegistry) -> None:
    @job(idempotency_key=lambda i: str(i.size), registry=registry, retry=Retry(attempts=3))
    async def produce(input: Blob, ctx: JobContext) -> dict[str, str]:
        return {"data": "x" * input.size}

    @job(idempotency_key=lambda i: str(i.size), registry=registry, retry=Retry(attempts=3))
    async def stepped(input: Blob, ctx: JobContext) -> int:
        data = await ctx.step.run("load", lambda: "y" * input.size)
        return len(data)


async def _settled(jobs: Jobs, name: str, size: int) -> tuple[str, object, object]:
    enqueued = await jobs.enqueue(name, {"size": size})
    with anyio.fail_after(30):
        await Worker(jobs, prune=False).run_until_idle()
    record = await jobs.get(enqueued.id)
    return record.state, record.output, record.last_error


async def test_an_output_within_the_bound_is_stored(jobs: Jobs, registry: JobRegistry) -> None:
    _declare(registry)
    state, output, _ = await _settled(jobs, "produce", BOUND - 100)
    assert state == "done" and output == {"data": "x" * (BOUND - 100)}


async def test_an_output_past_the_bound_fails_the_job_naming_it_and_its_size(
    jobs: Jobs, registry: JobRegistry
) -> None:
    _declare(registry)
    state, output, error = await _settled(jobs, "produce", BOUND + 1)
    assert state == "failed" and output is None and error is not None
    assert error.code == "JOB_OUTPUT_INVALID" and not error.retryable  # type: ignore[attr-defined]
    cause = error.cause  # type: ignore[attr-defined]
    assert '"produce"' in cause and f"{BOUND + 12} bytes" in cause and str(BOUND) in cause
    assert error.fix == f"export {PAYLOAD_ENV}={BOUND + 12}"  # type: ignore[attr-defined]


async def test_a_step_result_past_the_bound_fails_the_job_and_is_not_stored(
    jobs: Jobs, registry: JobRegistry
) -> None:
    _declare(registry)
    state, _, error = await _settled(jobs, "stepped", BOUND + 1)
    assert state == "failed" and error is not None
    assert error.code == "JOB_OUTPUT_INVALID"  # type: ignore[attr-defined]
    assert 'step "load"' in error.cause and f"{BOUND + 3} bytes" in error.cause  # type: ignore[attr-defined]


async def test_the_clients_own_bound_holds_for_its_outputs(
    jobs: Jobs, registry: JobRegistry
) -> None:
    """`connect(max_payload_bytes=...)` bounds what its worker stores, as what it enqueues."""
    _declare(registry)
    wider = Jobs(jobs.driver, registry=registry, clock=jobs.clock, max_payload_bytes=4 * BOUND)
    state, output, _ = await _settled(wider, "produce", BOUND + 1)
    assert state == "done" and output == {"data": "x" * (BOUND + 1)}
    narrower = Jobs(jobs.driver, registry=registry, clock=jobs.clock, max_payload_bytes=BOUND // 2)
    state, _, error = await _settled(narrower, "produce", BOUND - 100)
    assert state == "failed" and error is not None and str(BOUND // 2) in error.cause  # type: ignore[attr-defined]
