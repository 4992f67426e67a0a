"""Two apps on one database and one queue: each worker claims the other's jobs too. A job whose
name this worker does not run, but a live worker publishes, goes straight back for that worker
(ready, no attempt, no error, kept out of this worker's next claims for a while); only a name no
live worker publishes is parked as JOB_UNKNOWN for the long period."""

from __future__ import annotations

from pydantic import BaseModel

from engine import JobContext, JobDefinition, JobRegistry, Jobs, ManualClock, Worker, job
from engine.descriptors import STALE_AFTER_MS
from engine.run_job import UNKNOWN_NAME_PARK_MS
from engine.testing.observe import Recorder
from engine.worker_unknown_names import PASS_ON_MS


class Item(BaseModel):
    n: int


def declare(registry: JobRegistry, name: str) -> JobDefinition[Item]:
    @job(name=name, idempotency_key=lambda i: f"{name}:{i.n}", registry=registry)
    async def body(input: Item, ctx: JobContext) -> dict[str, str]:
        return {"by": name}

    return body


def other_app(jobs: Jobs, clock: ManualClock) -> tuple[Jobs, JobDefinition[Item]]:
    """App B on app A's database: its own registry (`beta`), the same driver and queue."""
    registry = JobRegistry()
    beta = declare(registry, "beta")
    return Jobs(jobs.driver, registry=registry, clock=clock), beta


async def test_a_job_another_live_app_runs_goes_back_at_once_for_it_and_runs_there(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    declare(registry, "alpha")
    app_b, beta = other_app(jobs, clock)
    worker_b = Worker(app_b, concurrency=2)
    await worker_b.publish_descriptors()  # B is live and says it runs `beta`
    enqueued = await app_b.enqueue(beta, {"n": 1})
    recorder = Recorder()
    worker_a = Worker(jobs, concurrency=2, listeners=[recorder])

    assert await worker_a.run_until_idle() == 1  # A claimed it: the queue is A's too
    record = await jobs.get(enqueued.id)
    assert (record.state, record.attempt, record.last_error) == ("ready", 0, None)
    off_beat = worker_a.gate.unknown_names.off_beat_ms  # a tenth of a poll: see its module
    assert record.run_at == clock.now_ms() + PASS_ON_MS + off_beat
    assert recorder.kinds(enqueued.id) == ["handed_back"]
    assert await worker_a.run_until_idle() == 0  # not claimed again by A at once

    clock.advance(PASS_ON_MS + off_beat)
    assert await worker_b.run_until_idle() == 1
    done = await jobs.get(enqueued.id)
    assert (done.state, done.attempt, done.output) == ("done", 1, {"by": "beta"})


async def test_a_job_that_keeps_landing_on_the_wrong_app_waits_longer_each_time_up_to_a_park(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    """No hot loop: B stays live but never claims, and A's claims of the job space out."""
    declare(registry, "alpha")
    app_b, beta = other_app(jobs, clock)
    worker_b = Worker(app_b, concurrency=2)
    enqueued = await app_b.enqueue(beta, {"n": 1})
    worker_a = Worker(jobs, concurrency=2)
    waits: list[int] = []
    for _ in range(7):
        await worker_b.publish_descriptors()
        assert await worker_a.run_until_idle() == 1
        record = await jobs.get(enqueued.id)
        assert (record.state, record.attempt, record.last_error) == ("ready", 0, None)
        waits.append(record.run_at - clock.now_ms())
        clock.advance(waits[-1])
    off_beat = worker_a.gate.unknown_names.off_beat_ms
    expected = [PASS_ON_MS * 2**k for k in range(5)] + [UNKNOWN_NAME_PARK_MS] * 2
    assert waits == [wait + off_beat for wait in expected]


async def test_a_name_no_live_worker_publishes_is_parked_as_unknown(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    declare(registry, "alpha")
    app_b, beta = other_app(jobs, clock)
    enqueued = await app_b.enqueue(beta, {"n": 1})
    worker_a = Worker(jobs, concurrency=2)
    assert await worker_a.run_until_idle() == 1
    record = await jobs.get(enqueued.id)
    assert (record.state, record.attempt) == ("suspended", 0)
    assert record.last_error is not None and record.last_error.code == "JOB_UNKNOWN"
    assert record.run_at == clock.now_ms() + UNKNOWN_NAME_PARK_MS


async def test_a_name_whose_worker_stopped_publishing_is_parked_once_its_descriptor_is_stale(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    declare(registry, "alpha")
    app_b, beta = other_app(jobs, clock)
    await Worker(app_b).publish_descriptors()
    clock.advance(STALE_AFTER_MS + 1)  # B is gone: its descriptor went stale
    enqueued = await app_b.enqueue(beta, {"n": 1})
    worker_a = Worker(jobs, concurrency=2)
    assert await worker_a.run_until_idle() == 1
    record = await jobs.get(enqueued.id)
    assert record.state == "suspended"
    assert record.last_error is not None and record.last_error.code == "JOB_UNKNOWN"
