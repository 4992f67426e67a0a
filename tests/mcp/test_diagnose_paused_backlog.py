"""A backlog a pause holds is QUEUE_PAUSED's or JOB_PAUSED's, whose fix is the resume: it was
also BACKLOG_OLD, whose fix started a worker that could run none of it (exploreP). Jobs of the
same queue that no pause holds, waiting as long, still are BACKLOG_OLD."""

from __future__ import annotations

from typing import Any

from engine import Jobs, ManualClock
from tests.mcp.conftest import OpenMcp
from tests.support.presence import beat

PAST_THRESHOLD_MS = 61_000


async def _diagnosed(jobs: Jobs, clock: ManualClock, open_mcp: OpenMcp) -> dict[str, Any]:
    clock.advance(PAST_THRESHOLD_MS)
    await beat(jobs, concurrency=8)
    async with open_mcp() as mcp:
        diagnosis = await mcp.ok("diagnose_queue", {"queue": "mail"})
    return {f["code"]: f for f in diagnosis["findings"]}


async def test_a_paused_queues_backlog_is_queue_paused_not_backlog_old(
    jobs: Jobs, clock: ManualClock, open_mcp: OpenMcp
) -> None:
    for n in range(3):
        await jobs.enqueue("greet", {"user_id": n + 1})
    await jobs.pause(queue="mail")
    codes = await _diagnosed(jobs, clock, open_mcp)
    assert "QUEUE_PAUSED" in codes and "resume" in codes["QUEUE_PAUSED"]["fix"], codes
    assert "BACKLOG_OLD" not in codes, codes["BACKLOG_OLD"]["fix"]


async def test_a_paused_jobs_backlog_is_job_paused_not_backlog_old(
    jobs: Jobs, clock: ManualClock, open_mcp: OpenMcp
) -> None:
    for n in range(3):
        await jobs.enqueue("greet", {"user_id": n + 1})
    await jobs.pause(job="greet")
    codes = await _diagnosed(jobs, clock, open_mcp)
    assert "JOB_PAUSED" in codes and "resume" in codes["JOB_PAUSED"]["fix"], codes
    assert "BACKLOG_OLD" not in codes, codes["BACKLOG_OLD"]["fix"]


async def test_other_jobs_waiting_beside_a_paused_job_are_still_backlog_old(
    jobs: Jobs, clock: ManualClock, open_mcp: OpenMcp
) -> None:
    for n in range(3):
        await jobs.enqueue("greet", {"user_id": n + 1})
    await jobs.enqueue("receipt", {"order_id": 1}, tenant_id="acme")
    await jobs.pause(job="greet")
    codes = await _diagnosed(jobs, clock, open_mcp)
    assert "JOB_PAUSED" in codes, codes
    old = codes["BACKLOG_OLD"]
    assert "has 1 ready job(s) of no paused job" in old["cause"], old["cause"]
