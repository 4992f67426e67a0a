"""A producer without the app's code stages a job known only by the descriptor a worker
published, passing its key, exactly as it enqueues one: `stage(..., key=)` and
`stage_many([Enqueue(..., key=)])`. The rule (published input checked against its schema, the
key required; a registered job's key must be the one it computes) is enqueue's own."""

from __future__ import annotations

import pytest

from engine import Enqueue, JobRegistry, Jobs, ManualClock, Worker
from engine.errors import JobsError
from engine.testing.kit.test_descriptors import declare
from tests.outbox.apptx import AppDatabase
from tests.outbox.test_stage import declare_confirm, published


async def _refused(app: AppDatabase, stage: object, code: str) -> JobsError:
    tx = await app.begin()
    try:
        with pytest.raises(JobsError) as caught:
            await stage(tx.handle)  # type: ignore[operator]
    finally:
        await tx.rollback()
    assert caught.value.code == code, caught.value
    return caught.value


async def test_a_producer_without_the_app_stages_a_published_job_with_its_key(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock, app: AppDatabase
) -> None:
    assert len(registry) == 0  # the producer imported no app
    worker_app = JobRegistry()
    declare(worker_app)
    await Worker(Jobs(jobs.driver, registry=worker_app, clock=clock)).publish_descriptors()

    tx = await app.begin()
    one = await jobs.stage(tx.handle, "charge", {"order_id": 3}, key="charge:3")
    (two,) = await jobs.stage_many(tx.handle, [Enqueue("charge", {"order_id": 4}, key="charge:4")])
    await tx.commit()
    assert await published(jobs) == 2
    for staged, key in ((one, "charge:3"), (two, "charge:4")):
        record = await jobs.get(staged.job_id)
        assert (record.name, record.queue, record.idempotency_key) == ("charge", "billing", key)

    missing = await _refused(
        app, lambda h: jobs.stage(h, "charge", {"order_id": 5}), "IDEMPOTENCY_KEY_MISSING"
    )
    assert missing.details is not None and missing.details["argument"] == "key"
    await _refused(
        app, lambda h: jobs.stage(h, "charge", {"order_id": 0}, key="k"), "JOB_INPUT_INVALID"
    )
    unknown = await _refused(
        app, lambda h: jobs.stage(h, "refund", {"order_id": 5}, key="k"), "JOB_UNKNOWN"
    )
    assert unknown.details is not None and unknown.details["known"] == ["charge"]
    assert await published(jobs) == 0  # nothing refused was staged


async def test_a_registered_jobs_key_must_be_the_one_it_computes(
    jobs: Jobs, registry: JobRegistry, app: AppDatabase
) -> None:
    confirm = declare_confirm(registry)
    tx = await app.begin()
    staged = await jobs.stage(tx.handle, confirm, {"order_id": "o-9"}, key="order:o-9")
    await tx.commit()
    assert await published(jobs) == 1
    assert (await jobs.get(staged.job_id)).idempotency_key == "order:o-9"
    wrong = await _refused(
        app, lambda h: jobs.stage(h, confirm, {"order_id": "o-8"}, key="other"), "INVALID_ARGUMENT"
    )
    assert wrong.details is not None and wrong.details["argument"] == "key"
    assert "order:o-8" in wrong.cause
