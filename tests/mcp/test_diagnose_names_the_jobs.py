"""NO_LIVE_WORKERS and LEASES_EXPIRED name the jobs they count (exploreU: "1 job(s)" beside
`job_ids: []`), as the enqueue's and the wait's notices do; so does a backfill write's."""

from __future__ import annotations

from typing import Any

from engine import Jobs, ManualClock
from schemas.stats import WorkerInfo
from tests.mcp.conftest import OpenMcp


async def _findings(open_mcp: OpenMcp, arguments: dict[str, Any]) -> dict[str, Any]:
    async with open_mcp() as mcp:
        diagnosis = await mcp.ok("diagnose_queue", arguments)
    return {f["code"]: f for f in diagnosis["findings"]}


async def test_no_live_workers_names_the_jobs_that_wait(jobs: Jobs, open_mcp: OpenMcp) -> None:
    ids = {(await jobs.enqueue("greet", {"user_id": n})).id for n in (1, 2)}
    for arguments in ({}, {"queue": "mail"}):
        found = await _findings(open_mcp, arguments)
        assert set(found["NO_LIVE_WORKERS"]["job_ids"]) == ids, found["NO_LIVE_WORKERS"]


async def test_a_queue_no_live_worker_serves_names_its_jobs(jobs: Jobs, open_mcp: OpenMcp) -> None:
    now = jobs.clock.now_ms()
    other = WorkerInfo(
        id="other", hostname="test", pid=0, queues=["elsewhere"], concurrency=1,
        started_at=now, last_seen_at=now,
    )  # fmt: skip
    await jobs.driver.worker_seen(other)
    waiting = await jobs.enqueue("greet", {"user_id": 3})
    found = await _findings(open_mcp, {})
    assert found["NO_LIVE_WORKERS"]["job_ids"] == [waiting.id], found["NO_LIVE_WORKERS"]


async def test_leases_expired_names_the_jobs_whose_lease_ran_out(
    jobs: Jobs, clock: ManualClock, open_mcp: OpenMcp
) -> None:
    held = await jobs.enqueue("greet", {"user_id": 4})
    (claimed,) = await jobs.driver.claim("gone", 1, 1_000)
    assert claimed.record.id == held.id
    clock.advance(5_000)
    found = await _findings(open_mcp, {"queue": "mail"})
    assert found["LEASES_EXPIRED"]["job_ids"] == [held.id], found["LEASES_EXPIRED"]


async def test_no_live_workers_names_a_job_whose_lease_ran_out(
    jobs: Jobs, clock: ManualClock, open_mcp: OpenMcp
) -> None:
    """exploreZ: after a kill -9, NO_LIVE_WORKERS counted "1 job(s) are due" (the lapsed lease)
    beside `job_ids: []`: only ready jobs were sampled."""
    held = await jobs.enqueue("greet", {"user_id": 5})
    (claimed,) = await jobs.driver.claim("gone", 1, 1_000)
    assert claimed.record.id == held.id
    clock.advance(5_000)
    for arguments in ({}, {"queue": "mail"}):
        found = await _findings(open_mcp, arguments)
        assert found["NO_LIVE_WORKERS"]["job_ids"] == [held.id], found["NO_LIVE_WORKERS"]


async def test_queue_paused_names_the_jobs_it_holds(jobs: Jobs, open_mcp: OpenMcp) -> None:
    """exploreZ: QUEUE_PAUSED said "its 1 ready job(s) are not claimed" with `job_ids: []`."""
    waiting = await jobs.enqueue("greet", {"user_id": 6})
    await jobs.pause(queue="mail", reason="maintenance")
    for arguments in ({}, {"queue": "mail"}):
        found = await _findings(open_mcp, arguments)
        assert found["QUEUE_PAUSED"]["job_ids"] == [waiting.id], found["QUEUE_PAUSED"]


async def test_a_paused_queues_jobs_are_not_said_to_wait_for_a_worker(
    jobs: Jobs, open_mcp: OpenMcp
) -> None:
    """exploreB2: with the queue paused and no worker, NO_LIVE_WORKERS (critical) counted the
    paused job as due for a worker, whose fix would not run it; QUEUE_PAUSED names it."""
    held = await jobs.enqueue("greet", {"user_id": 7})
    await jobs.pause(queue="mail", reason="maintenance")
    for arguments in ({}, {"queue": "mail"}):
        found = await _findings(open_mcp, arguments)
        assert "NO_LIVE_WORKERS" not in found, found["NO_LIVE_WORKERS"]
        assert found["QUEUE_PAUSED"]["job_ids"] == [held.id]
