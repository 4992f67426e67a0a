"""`--tenant T`: every tool acts in T only; another tenant's job does not exist for it."""

from __future__ import annotations

import pytest
from mcp.shared.exceptions import MCPError

from engine import Jobs, ManualClock, Worker
from mcp_jobs.config import Settings
from tests.mcp.conftest import OpenMcp

PINNED = Settings(tenant="acme")


async def test_enqueue_uses_the_pinned_tenant_and_refuses_another(
    jobs: Jobs, open_mcp: OpenMcp
) -> None:
    async with open_mcp(PINNED) as mcp:
        made = await mcp.ok("enqueue_job", {"name": "receipt", "input": {"order_id": 1}})
        assert made["tenant_id"] == "acme"
        assert (await jobs.get(made["job_id"])).tenant_id == "acme"
        same = await mcp.ok(
            "enqueue_job", {"name": "receipt", "input": {"order_id": 2}, "tenant_id": "acme"}
        )
        assert same["tenant_id"] == "acme"
        error = await mcp.fails(
            "enqueue_job",
            {"name": "receipt", "input": {"order_id": 3}, "tenant_id": "globex"},
            "TENANT_PINNED",
        )
        assert error["details"] == {"tenant_id": "acme"}
    assert len((await jobs.list(tenant_id="globex")).jobs) == 0


async def test_another_tenants_job_cannot_be_seen_cancelled_retried_or_awaited(
    jobs: Jobs, open_mcp: OpenMcp
) -> None:
    theirs = await jobs.enqueue("receipt", {"order_id": 1}, tenant_id="globex")
    dead_theirs = await jobs.enqueue("flaky", {"key": "g"}, tenant_id="globex")
    ours = await jobs.enqueue("receipt", {"order_id": 1}, tenant_id="acme")
    await jobs.cancel(dead_theirs.id)
    async with open_mcp(PINNED) as mcp:
        listed = await mcp.ok("list_jobs")
        assert [j["id"] for j in listed["jobs"]] == [ours.id]
        await mcp.fails("list_jobs", {"tenant_id": "globex"}, "TENANT_PINNED")
        for tool, arguments in (
            ("inspect_job", {"job_id": theirs.id}),
            ("cancel_job", {"job_id": theirs.id}),
            ("retry_job", {"job_id": dead_theirs.id, "include_cancelled": True}),
            ("wait_for_job", {"job_id": theirs.id, "timeout_seconds": 0}),
        ):
            error = await mcp.fails(tool, arguments, "JOB_NOT_FOUND")
            assert theirs.id in error["cause"] or dead_theirs.id in error["cause"]
            assert "acme" in error["cause"]
        await mcp.ok("cancel_job", {"job_id": ours.id})
        with pytest.raises(MCPError):
            await mcp.client.read_resource(f"jobs://runs/{theirs.id}")
    assert (await jobs.get(theirs.id)).state == "ready"
    assert (await jobs.get(dead_theirs.id)).state == "cancelled"
    # The refused calls left nothing in the other tenant's trace.
    trace = await jobs.trace(theirs.id)
    assert [e.kind for e in trace.events if e.kind == "mcp.call"] == []


async def test_stats_and_diagnosis_count_only_the_pinned_tenant(
    jobs: Jobs, clock: ManualClock, open_mcp: OpenMcp
) -> None:
    await jobs.enqueue("receipt", {"order_id": 1}, tenant_id="acme")
    for order in range(1, 4):
        await jobs.enqueue("receipt", {"order_id": order}, tenant_id="globex")
    dead = await jobs.enqueue("flaky", {"key": "x"}, tenant_id="globex")
    worker = Worker(jobs, queues=["catalog"])
    await worker.run_until_idle()
    clock.advance(1_000)
    await worker.run_until_idle()
    assert (await jobs.get(dead.id)).state == "dead"
    async with open_mcp(PINNED) as mcp:
        stats = await mcp.ok("queue_stats")
        assert stats["tenant_id"] == "acme"
        assert [(q["queue"], q["ready"]) for q in stats["queues"]] == [("mail", 1)]
        found = await mcp.ok("diagnose_queue")
        assert "DEAD_LETTERS" not in {f["code"] for f in found["findings"]}
    async with open_mcp() as mcp:
        everyone = await mcp.ok("queue_stats")
        by_queue = {q["queue"]: q for q in everyone["queues"]}
        assert by_queue["mail"]["ready"] == 4 and by_queue["catalog"]["dead"] == 1
