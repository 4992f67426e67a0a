"""A job flooded past its rate limit: every shed job holds a reserved turn, so the limit's next
start is a turn due now while turns are reserved well ahead. `diagnose_queue` still says
RATE_LIMITED (the limit holds the backlog back, more workers would not start it sooner), and
does not also call the backlog BACKLOG_OLD with the fix of starting a bigger worker."""

from __future__ import annotations

from engine import Jobs, ManualClock
from engine.drivers.base import RATES, require
from engine.rate_limits import RateTake
from tests.mcp.conftest import OpenMcp
from tests.support.presence import beat

PER_MS = 1_000
FLOOD = 100


async def _flood(jobs: Jobs) -> None:
    """FLOOD greet jobs taken as workers take them: the first starts, each other one is shed
    and reserves its turn, one a second."""
    store = require(jobs.driver, RATES)
    take = RateTake("job:greet", 1, PER_MS, 1)
    now = jobs.clock.now_ms()
    for n in range(FLOOD):
        job_id = (await jobs.enqueue("greet", {"user_id": n + 1})).id
        await store.take_rates([take], now, job_id=job_id)


async def test_a_flooded_rate_limit_is_rate_limited_not_an_old_backlog(
    jobs: Jobs, clock: ManualClock, open_mcp: OpenMcp
) -> None:
    await _flood(jobs)
    clock.advance(61 * PER_MS)  # past the backlog threshold, on a reserved turn
    await beat(jobs, concurrency=8)
    async with open_mcp() as mcp:
        (mail,) = (await mcp.ok("queue_stats", {"queues": ["mail"]}))["queues"]
        (limit,) = [r for r in mail["rate_limits"] if r["key"] == "job:greet"]
        assert limit["reserved_until"] > clock.now_ms()  # turns reserved ahead: it holds
        diagnosis = await mcp.ok("diagnose_queue", {"queue": "mail"})
    codes = {f["code"]: f for f in diagnosis["findings"]}
    assert "RATE_LIMITED" in codes, diagnosis["findings"]
    assert "job:greet" in codes["RATE_LIMITED"]["cause"]
    assert "limits --json" in codes["RATE_LIMITED"]["fix"]
    assert "BACKLOG_OLD" not in codes, codes["BACKLOG_OLD"]["fix"]


async def test_an_old_backlog_no_limit_holds_is_still_backlog_old(
    jobs: Jobs, clock: ManualClock, open_mcp: OpenMcp
) -> None:
    await _flood(jobs)
    clock.advance((FLOOD + 5) * PER_MS)  # every turn passed: the limit holds nothing now
    await beat(jobs, concurrency=8)
    async with open_mcp() as mcp:
        diagnosis = await mcp.ok("diagnose_queue", {"queue": "mail"})
    codes = {f["code"] for f in diagnosis["findings"]}
    assert "BACKLOG_OLD" in codes and "RATE_LIMITED" not in codes


async def test_other_jobs_waiting_beside_a_flooded_limit_are_still_backlog_old(
    jobs: Jobs, clock: ManualClock, open_mcp: OpenMcp
) -> None:
    await _flood(jobs)
    # A job of the same queue no limit holds, waiting as long: it waits for workers.
    await jobs.enqueue("receipt", {"order_id": 1}, tenant_id="acme")
    clock.advance(61 * PER_MS)
    await beat(jobs, concurrency=8)
    async with open_mcp() as mcp:
        diagnosis = await mcp.ok("diagnose_queue", {"queue": "mail"})
    codes = {f["code"]: f for f in diagnosis["findings"]}
    assert "RATE_LIMITED" in codes, diagnosis["findings"]
    assert "BACKLOG_OLD" in codes, diagnosis["findings"]
    backlog = codes["BACKLOG_OLD"]
    assert backlog["cause"].startswith("queue mail has 1 ready job(s) under no rate limit")
