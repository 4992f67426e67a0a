"""Rate limits as the MCP tools show them: `queue_stats` lists a queue's limits with the next
start while one holds work back, `diagnose_queue` says RATE_LIMITED (which key, the rate, the
next start), and a tenant-pinned server sees neither other tenants' keys nor computed ones."""

from __future__ import annotations

from engine import Jobs, ManualClock
from engine.drivers.base import RATES, require
from engine.rate_limits import RateTake
from mcp_jobs.config import Settings
from mcp_jobs.operations.rate_limits import MAX_KEYS
from tests.mcp.conftest import OpenMcp
from tests.support.presence import beat


async def test_queue_stats_and_diagnose_show_a_limit_holding_work_back(
    jobs: Jobs, clock: ManualClock, open_mcp: OpenMcp
) -> None:
    await jobs.enqueue("greet", {"user_id": 1}, tenant_id="acme")
    await beat(jobs)
    now = clock.now_ms()
    store = require(jobs.driver, RATES)
    for take in (
        RateTake("queue:mail", 1, 60_000, 1),
        RateTake("job:greet:customer-7", 2, 1_000, 1),
        RateTake("tenant:acme", 5, 1_000, 5),
        RateTake("tenant:globex", 5, 1_000, 5),
    ):
        await store.take_rates([take], now)
    async with open_mcp() as mcp:
        stats = await mcp.ok("queue_stats", {"queues": ["mail"]})
        (mail,) = stats["queues"]
        limits = {r["key"]: r for r in mail["rate_limits"]}
        assert set(limits) == {"queue:mail", "job:greet:customer-7"}
        assert limits["queue:mail"]["rate"] == "1 per 60s"
        assert limits["queue:mail"]["next_start_at"] == now + 60_000
        assert limits["queue:mail"]["next_start_at_iso"].endswith("Z")
        assert [r["key"] for r in stats["tenant_rate_limits"]] == ["tenant:acme", "tenant:globex"]
        assert "next_start_at" not in stats["tenant_rate_limits"][0]  # a burst of 5: free

        diagnosis = await mcp.ok("diagnose_queue", {"queue": "mail"})
        (finding,) = [f for f in diagnosis["findings"] if f["code"] == "RATE_LIMITED"]
        assert finding["severity"] == "info" and finding["queue"] == "mail"
        assert "queue:mail" in finding["cause"] and "1 per 60s" in finding["cause"]
        assert "not for workers" in finding["cause"] and "limits --json" in finding["fix"]

    clock.advance(60_000)
    async with open_mcp() as mcp:
        diagnosis = await mcp.ok("diagnose_queue", {"queue": "mail"})
        assert not [f for f in diagnosis["findings"] if f["code"] == "RATE_LIMITED"]

    async with open_mcp(Settings(tenant="acme")) as mcp:
        stats = await mcp.ok("queue_stats", {})
        (mail,) = stats["queues"]
        assert [r["key"] for r in mail["rate_limits"]] == ["queue:mail"]
        assert [r["key"] for r in stats["tenant_rate_limits"]] == ["tenant:acme"]


async def test_many_computed_keys_never_hide_a_queue_or_tenant_limit(
    jobs: Jobs, clock: ManualClock, open_mcp: OpenMcp
) -> None:
    """Stored keys are read a kind at a time: with more computed `job:` keys than an answer reads
    (one per customer), the queue's limit still shows and `diagnose_queue` still finds it, and a
    pinned tenant still sees its own key among thousands of tenants'."""
    await jobs.enqueue("greet", {"user_id": 1}, tenant_id="acme")
    await beat(jobs)
    now = clock.now_ms()
    store = require(jobs.driver, RATES)
    many = MAX_KEYS + 5
    for n in range(many):
        await store.take_rates([RateTake(f"job:greet:customer-{n:05}", 5, 1_000, 5)], now)
        await store.take_rates([RateTake(f"tenant:a{n:05}", 5, 1_000, 5)], now)
    await store.take_rates([RateTake("queue:mail", 1, 60_000, 1)], now)
    await store.take_rates([RateTake("tenant:acme", 1, 60_000, 1)], now)
    async with open_mcp() as mcp:
        (mail,) = (await mcp.ok("queue_stats", {"queues": ["mail"]}))["queues"]
        keys = [r["key"] for r in mail["rate_limits"]]
        assert "queue:mail" in keys and len(keys) == MAX_KEYS + 1
        diagnosis = await mcp.ok("diagnose_queue", {"queue": "mail"})
        (finding,) = [f for f in diagnosis["findings"] if f["code"] == "RATE_LIMITED"]
        assert "queue:mail" in finding["cause"]
    async with open_mcp(Settings(tenant="acme")) as mcp:
        stats = await mcp.ok("queue_stats", {})
        assert [r["key"] for r in stats["tenant_rate_limits"]] == ["tenant:acme"]
