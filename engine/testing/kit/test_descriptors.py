"""Published job descriptors: a worker publishes its jobs' descriptors, and a client without the
code describes and enqueues them from the database (engine/descriptors.py), on every driver
that keeps them: one row per name, the last writer wins, stale past the live-worker window,
deleted by the pruner once nobody has published it for `DESCRIPTOR_EXPIRY_MS`."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, Field

from engine import JobContext, JobRegistry, Jobs, ManualClock, Retry, Worker, job
from engine.descriptors import DESCRIPTOR_EXPIRY_MS, STALE_AFTER_MS, to_publish
from engine.drivers.base import DESCRIPTORS, DescriptorStore, require
from engine.errors import JobsError
from engine.pruner import Pruner
from engine.retention import DAY_MS, Policy, Retention
from schemas.events import EventRecord


class Charge(BaseModel):
    order_id: int = Field(ge=1)
    note: str = ""


def declare(registry: JobRegistry, queue: str = "billing") -> None:
    @job(
        idempotency_key=lambda i: f"charge:{i.order_id}",
        queue=queue,
        retry=Retry(attempts=4),
        registry=registry,
        description="Charge an order.",
    )
    async def charge(input: Charge, ctx: JobContext) -> dict[str, Any]:
        return {"charged": input.order_id}


def store_of(jobs: Jobs) -> DescriptorStore:
    if not DESCRIPTORS.offered_by(jobs.driver):
        pytest.skip(f"the {jobs.driver.kind} driver keeps no published descriptors")
    return require(jobs.driver, DESCRIPTORS)


def without_code(jobs: Jobs) -> Jobs:
    """A second client on the same database whose process has imported no job."""
    return Jobs(jobs.driver, registry=JobRegistry(), clock=jobs.clock)


async def _code(jobs: Jobs, call: Any) -> tuple[str, dict[str, Any]]:
    with pytest.raises(JobsError) as raised:
        await call
    return raised.value.code, raised.value.details or {}


async def test_a_client_without_the_code_describes_and_enqueues_what_a_worker_published(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    store_of(jobs)
    declare(registry)
    worker = Worker(jobs, worker_id="w-app", apps=["shop.jobs"])
    await worker.publish_descriptors()
    producer = without_code(jobs)

    (described,) = await producer.describe()
    local = (await jobs.describe("charge"))[0]
    assert local.source == "registry" and not local.key_required and local.stale is None
    assert described.source == "published" and described.key_required
    assert (described.published_by, described.published_at) == ("w-app", clock.now_ms())
    assert described.apps == ["shop.jobs"] and described.stale is False
    assert described.version == local.version is not None
    assert described.input_schema == local.input_schema
    assert (described.queue, described.retry.attempts) == ("billing", 4)
    assert await producer.describe("charge") == [described]
    code, details = await _code(producer, producer.describe("refund"))
    assert code == "JOB_UNKNOWN" and details["known"] == ["charge"]

    # The input is checked against the published schema, field by field, as pydantic reports it.
    code, details = await _code(producer, producer.enqueue("charge", {"order_id": 0}, key="k"))
    assert code == "JOB_INPUT_INVALID"
    assert [(e["loc"], e["type"]) for e in details["errors"]] == [(["order_id"], "minimum")]
    code, details = await _code(producer, producer.enqueue("charge", {"note": 5}, key="k"))
    assert sorted((e["loc"], e["type"]) for e in details["errors"]) == [
        (["note"], "type"),
        (["order_id"], "missing"),
    ]
    # The key function is the app's code: without it, the caller passes the key.
    code, details = await _code(producer, producer.enqueue("charge", {"order_id": 7}))
    assert code == "IDEMPOTENCY_KEY_MISSING" and details["argument"] == "key"
    assert details["apps"] == ["shop.jobs"]
    assert (await jobs.list()).jobs == []

    first = await producer.enqueue("charge", {"order_id": 7}, key="charge:7")
    again = await producer.enqueue("charge", {"order_id": 7}, key="charge:7")
    assert (again.id, again.deduped) == (first.id, True)
    record = await jobs.get(first.id)
    assert (record.name, record.queue, record.idempotency_key) == ("charge", "billing", "charge:7")
    # Stored as sent: the worker's model fills its defaults when it runs.
    assert (record.input, record.max_attempts) == ({"order_id": 7}, 4)
    # A client with the code dedupes against it: one key, computed or passed.
    assert (await jobs.enqueue("charge", {"order_id": 7})).id == first.id
    code, _ = await _code(jobs, jobs.enqueue("charge", {"order_id": 7}, key="other"))
    assert code == "INVALID_ARGUMENT"
    assert await worker.run_until_idle() == 1
    assert (await jobs.get(first.id)).output == {"charged": 7}


async def test_a_descriptor_is_stale_once_no_worker_published_it_within_the_window(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    store_of(jobs)
    declare(registry)
    worker = Worker(jobs, worker_id="w1")
    await worker.publish_descriptors()
    producer = without_code(jobs)
    clock.advance(STALE_AFTER_MS)
    assert [d.stale for d in await producer.describe()] == [False]
    clock.advance(1)
    assert [d.stale for d in await producer.describe()] == [True]
    # Stale is a warning, not a refusal: the job waits for a worker with the code.
    assert (await producer.enqueue("charge", {"order_id": 1}, key="charge:1")).state == "ready"
    await worker.publish_descriptors()
    assert [d.stale for d in await producer.describe("charge")] == [False]


async def test_the_last_writer_wins_per_name_with_its_version_and_worker(
    jobs: Jobs, clock: ManualClock
) -> None:
    store = store_of(jobs)
    old, new = JobRegistry(), JobRegistry()
    declare(old, queue="billing")
    declare(new, queue="billing-v2")
    (v1,) = [to_publish(d.describe(), ["app.v1"]) for d in old]
    (v2,) = [to_publish(d.describe(), ["app.v2"]) for d in new]
    assert v1.version != v2.version
    await store.publish_descriptors("w-old", [v1], clock.now_ms())
    clock.advance(5)
    await store.publish_descriptors("w-new", [v2], clock.now_ms())
    (kept,) = await store.published_descriptors()
    assert (kept.version, kept.published_by, kept.queue) == (v2.version, "w-new", "billing-v2")
    assert (kept.apps, kept.published_at) == (["app.v2"], clock.now_ms())
    clock.advance(5)
    await store.publish_descriptors("w-old", [v1], clock.now_ms())
    (kept,) = await store.published_descriptors("charge")
    assert (kept.version, kept.published_by) == (v1.version, "w-old")
    assert await store.published_descriptors("nope") == []


async def test_the_local_registry_wins_over_a_published_descriptor(
    jobs: Jobs, registry: JobRegistry
) -> None:
    store_of(jobs)
    declare(registry)
    published = JobRegistry()
    declare(published, queue="elsewhere")
    await Worker(Jobs(jobs.driver, registry=published, clock=jobs.clock)).publish_descriptors()
    (described,) = await jobs.describe()
    assert (described.source, described.queue) == ("registry", "billing")
    enqueued = await jobs.enqueue("charge", {"order_id": 2})
    assert (await jobs.get(enqueued.id)).queue == "billing"


async def test_the_pruner_deletes_descriptors_nobody_published_for_the_expiry(
    jobs: Jobs, clock: ManualClock
) -> None:
    store = store_of(jobs)
    registry = JobRegistry()
    declare(registry)
    (charge,) = [to_publish(d.describe(), []) for d in registry]
    refund = charge.model_copy(update={"name": "refund"})
    await store.publish_descriptors("w", [charge], clock.now_ms())
    clock.advance(1)
    await store.publish_descriptors("w", [refund], clock.now_ms())
    clock.advance(DESCRIPTOR_EXPIRY_MS)  # charge is 1 ms past the expiry, refund exactly at it
    await Pruner(jobs).pass_once()
    assert [d.name for d in await store.published_descriptors()] == ["refund"]
    assert await store.forget_descriptors(clock.now_ms() + 1) == 1
    assert await store.published_descriptors() == []


async def test_a_pruner_without_a_job_keeps_it_as_long_as_the_worker_running_it_published(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    """The worker running `charge` keeps done jobs 30 days and events of no job a year, set in
    its code (and does not prune); a pruner elsewhere that knows neither (its defaults: 7 and 90
    days) keeps them as long, and then prunes them."""
    store = store_of(jobs)
    declare(registry)
    running = Worker(jobs, prune=False, retention=Retention(done="30d", audit="365d"))
    await jobs.enqueue("charge", {"order_id": 1})
    assert await running.run_until_idle() == 1
    start = clock.now_ms()
    await jobs.driver.record_event(EventRecord(job_id=None, at=start, kind="mcp.call"))
    elsewhere = Pruner(without_code(jobs), holder="elsewhere", pause_ms=0, environ={})

    async def pass_at(days: int) -> tuple[int, int]:
        """Done jobs and events of no job left after a pass `days` days and 1 ms on."""
        clock.set(start + days * DAY_MS + 1)
        await running.publish_descriptors()  # a live worker republishes every 20 s
        await elsewhere.pass_once()
        done = len((await jobs.list(state="done")).jobs)
        return done, await jobs.driver.count_jobless_events(clock.now_ms())

    assert await pass_at(29) == (1, 1)
    (published,) = await store.published_descriptors()
    assert (
        published.retention
        == Policy(
            done=30 * DAY_MS,
            failed=30 * DAY_MS,
            dead=30 * DAY_MS,
            cancelled=7 * DAY_MS,
            audit=365 * DAY_MS,
        ).info()
    )
    assert await pass_at(30) == (0, 1)
    assert await pass_at(364) == (0, 1)
    assert await pass_at(365) == (0, 0)
