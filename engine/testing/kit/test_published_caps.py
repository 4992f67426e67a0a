"""A worker's concurrency caps travel with its presence (what diagnose_queue reads to tell a
queue held at a cap from one short of workers), on every driver: stored as published, replaced
by the next beat, and none for a worker that sets none."""

from __future__ import annotations

from engine import Jobs, Limits, ManualClock, Worker
from engine.testing.kit.test_worker_expiry import seen
from schemas.stats import WorkerInfo


def beat(worker_id: str, at: int, caps: dict[str, int] | None) -> WorkerInfo:
    return seen(worker_id, at).model_copy(update={"caps": caps})


async def test_the_caps_a_worker_publishes_are_read_back_as_published(
    jobs: Jobs, clock: ManualClock
) -> None:
    driver = jobs.driver
    now = clock.now_ms()
    await driver.worker_seen(beat("capped", now, {"queue:emails": 3, "tenant": 2, "global": 9}))
    await driver.worker_seen(beat("free", now, None))
    live = {w.id: w.caps for w in await driver.live_workers(0)}
    assert live == {"capped": {"queue:emails": 3, "tenant": 2, "global": 9}, "free": None}

    clock.advance(1)
    await driver.worker_seen(beat("capped", clock.now_ms(), {"queue:emails": 5}))
    live = {w.id: w.caps for w in await driver.live_workers(0)}
    assert live["capped"] == {"queue:emails": 5}


async def test_a_worker_beats_with_the_caps_of_its_limits(jobs: Jobs) -> None:
    limits = Limits(
        global_cap=50, per_queue={"emails": 10}, per_tenant=3, tenant_overrides={"acme": 20}
    )
    worker = Worker(jobs, limits=limits, queues=["emails"], scheduler=False, prune=False)
    await worker.presence.beat(publish=False)
    bare = Worker(jobs, queues=["emails"], scheduler=False, prune=False)
    await bare.presence.beat(publish=False)
    caps = {w.id: w.caps for w in await jobs.driver.live_workers(0)}
    assert caps[worker.id] == {
        "queue:emails": 10,
        "tenant:acme": 20,
        "tenant": 3,
        "global": 50,
    }
    assert caps[bare.id] is None
