"""`diagnose_queue` reports LEASES_HELD_BY_GONE_WORKER: running jobs whose lease has not run out
but whose worker no longer checks in. Before, such jobs showed as plain "running" and nothing
said they wait up to a whole lease before any worker may take them over. The finding counts them
per queue, says when the first lease runs out, and its fix is LEASES_EXPIRED's (the line that
starts a worker on the queue), which it turns into once the leases have run out."""

from __future__ import annotations

from typing import Any

from engine import Jobs, ManualClock
from engine.metrics import LIVE_WORKER_WINDOW_MS
from mcp_jobs.config import Settings
from schemas.stats import WorkerInfo
from tests.mcp.conftest import OpenMcp

LEASE_MS = 600_000
GONE = "LEASES_HELD_BY_GONE_WORKER"


async def _seen(jobs: Jobs, worker_id: str) -> None:
    now = jobs.clock.now_ms()
    info = WorkerInfo(
        id=worker_id, hostname="test", pid=0, queues=None, concurrency=4,
        started_at=now, last_seen_at=now,
    )  # fmt: skip
    await jobs.driver.worker_seen(info)


def _of(diagnosis: dict[str, Any], code: str) -> list[dict[str, Any]]:
    return [f for f in diagnosis["findings"] if f["code"] == code]


async def test_running_jobs_of_a_worker_that_stopped_checking_in_are_a_finding(
    jobs: Jobs, clock: ManualClock, open_mcp: OpenMcp
) -> None:
    for n in range(3):
        await jobs.enqueue("greet", {"user_id": n + 1})
    await _seen(jobs, "w-gone")
    held = {c.record.id for c in await jobs.driver.claim("w-gone", 2, LEASE_MS)}
    await _seen(jobs, "w-live")
    await jobs.driver.claim("w-live", 1, LEASE_MS)
    async with open_mcp() as mcp:  # both check in: nothing to say
        assert _of(await mcp.ok("diagnose_queue", {}), GONE) == []

    clock.advance(LIVE_WORKER_WINDOW_MS + 1)  # w-gone stops checking in; w-live goes on
    await _seen(jobs, "w-live")
    async with open_mcp() as mcp:
        diagnosis = await mcp.ok("diagnose_queue", {})
        (finding,) = _of(diagnosis, GONE)
        assert diagnosis["healthy"] is False and finding["severity"] == "warning"
        assert finding["queue"] == "mail" and set(finding["job_ids"]) == held
        assert "2 running job(s) in queue mail" in finding["cause"]
        assert "(w-gone: " in finding["cause"] and "w-live" not in finding["cause"]
        first_s = (LEASE_MS - LIVE_WORKER_WINDOW_MS - 1) // 1000
        assert f"the first runs out in {first_s} s" in finding["cause"]
        assert "mcp-jobs worker" in finding["fix"] and "--queues mail" in finding["fix"]
        assert _of(diagnosis, "LEASES_EXPIRED") == []
        one = await mcp.ok("diagnose_queue", {"queue": "mail"})
        assert [f["code"] for f in _of(one, GONE)] == [GONE]

    clock.advance(LEASE_MS)  # their leases run out: a live worker takes them over now
    await _seen(jobs, "w-live")
    await _seen(jobs, "w-also-live")
    async with open_mcp() as mcp:
        diagnosis = await mcp.ok("diagnose_queue", {})
        (expired,) = _of(diagnosis, "LEASES_EXPIRED")
        assert _of(diagnosis, GONE) == []
        assert expired["fix"] == finding["fix"]  # the same line


async def test_a_worker_that_checks_in_holds_its_jobs_unremarked(
    jobs: Jobs, clock: ManualClock, open_mcp: OpenMcp
) -> None:
    await jobs.enqueue("greet", {"user_id": 1})
    await _seen(jobs, "w-live")
    await jobs.driver.claim("w-live", 1, LEASE_MS)
    clock.advance(LIVE_WORKER_WINDOW_MS + 1)
    await _seen(jobs, "w-live")
    async with open_mcp() as mcp:
        diagnosis = await mcp.ok("diagnose_queue", {})
        assert _of(diagnosis, GONE) == [] and diagnosis["healthy"] is True


async def test_a_tenant_pinned_caller_counts_its_own_jobs_and_is_not_told_worker_names(
    jobs: Jobs, clock: ManualClock, open_mcp: OpenMcp
) -> None:
    ours = await jobs.enqueue("greet", {"user_id": 1}, tenant_id="acme")
    await jobs.enqueue("greet", {"user_id": 2}, tenant_id="other")
    await _seen(jobs, "w-gone")
    await jobs.driver.claim("w-gone", 2, LEASE_MS)
    clock.advance(LIVE_WORKER_WINDOW_MS + 1)
    async with open_mcp(Settings(tenant="acme")) as mcp:
        (finding,) = _of(await mcp.ok("diagnose_queue", {}), GONE)
    assert finding["job_ids"] == [ours.id] and "1 running job(s)" in finding["cause"]
    assert "w-gone" not in finding["cause"]
