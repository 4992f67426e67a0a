"""A job's failure is stored as a structured error (code, cause, fix), read back the same from
every driver's row, and legacy "CODE: cause" text decodes to one."""

from __future__ import annotations

from typing import Any

from engine import JobContext, JobRegistry, Jobs, ManualClock, Retry, Worker, job
from engine.drivers.memory import MemoryDriver
from engine.errors import JobTimeoutError
from schemas.errors import ErrorPayload
from schemas.jobs import JobRecord
from tests.support.worker_jobs import Item


def record(last_error: Any) -> JobRecord:
    return JobRecord(
        id="j1",
        run_id="r1",
        name="work",
        queue="default",
        tenant_id=None,
        idempotency_key="k",
        input={},
        state="dead",
        attempt=1,
        max_attempts=1,
        run_at=0,
        queued_at=0,
        created_at=0,
        updated_at=0,
        last_error=last_error,
    )


def test_a_stored_json_error_reads_back_as_the_payload() -> None:
    payload = JobTimeoutError("work", 1_000).to_payload()
    assert record(payload.model_dump_json()).last_error == payload
    assert record(payload.model_dump()).last_error == payload
    assert record(payload).last_error == payload
    assert record(None).last_error is None


def test_legacy_text_decodes_to_its_code_or_job_failed() -> None:
    coded = record("JOB_TIMEOUT: ran too long").last_error
    assert coded is not None and (coded.code, coded.cause) == ("JOB_TIMEOUT", "ran too long")
    assert coded.fix == "mcp-jobs jobs show j1 --json"
    plain = record("ValueError: boom").last_error
    assert plain is not None and (plain.code, plain.cause) == ("JOB_FAILED", "ValueError: boom")
    braced = record("{not json").last_error
    assert braced is not None and braced.code == "JOB_FAILED"


async def test_a_body_that_raises_is_stored_as_job_failed_and_an_ack_clears_it(
    clock: ManualClock, registry: JobRegistry
) -> None:
    jobs = Jobs(MemoryDriver(clock), registry=registry, clock=clock)
    runs: list[int] = []

    @job(idempotency_key=lambda i: str(i.n), retry=Retry(attempts=2), registry=registry)
    async def flaky(input: Item, ctx: JobContext) -> None:
        runs.append(ctx.attempt)
        if ctx.attempt == 1:
            raise ValueError("boom\x00")

    queued = await jobs.enqueue(flaky, {"n": 1})
    worker = Worker(jobs)
    await worker.run_until_idle()
    error = (await jobs.get(queued.id)).last_error
    assert isinstance(error, ErrorPayload)
    assert error.code == "JOB_FAILED" and error.cause == "ValueError: boom\ufffd"
    # A client over memory:// reads it back as the call on itself (a shell's memory:// is
    # another, empty store): tests/engine/test_api_memory_fixes_are_python_calls.py.
    assert error.fix == f'await jobs.trace("{queued.id}")'
    assert error.details is not None
    assert {k: error.details[k] for k in ("job_id", "exception")} == {
        "job_id": queued.id,
        "exception": "ValueError",
    }
    # Its traceback too (tests/engine/test_failure_traceback.py), made storable like the cause.
    assert error.details["traceback"].endswith("ValueError: boom\ufffd\n")
    clock.advance(3_600_000)
    await worker.run_until_idle()
    done = await jobs.get(queued.id)
    assert (done.state, done.last_error, runs) == ("done", None, [1, 2])


async def test_an_unknown_name_is_parked_under_job_unknown(
    clock: ManualClock, registry: JobRegistry
) -> None:
    jobs = Jobs(MemoryDriver(clock), registry=registry, clock=clock)

    @job(idempotency_key=lambda i: str(i.n), registry=registry)
    async def gone(input: Item, ctx: JobContext) -> None:
        return None

    queued = await jobs.enqueue(gone, {"n": 1})
    registry.remove("gone")
    await Worker(jobs, queues="*").run_until_idle()
    parked = await jobs.get(queued.id)
    assert parked.state == "suspended"
    assert parked.last_error is not None and parked.last_error.code == "JOB_UNKNOWN"
