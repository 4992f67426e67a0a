"""`prune_history`: a dry run by default, a write that prunes and is audited, a pinned tenant's
rows only, and no such tool on a read-only server."""

from __future__ import annotations

import pytest
from mcp import MCPError
from mcp.types import INVALID_PARAMS

from engine import JobRegistry, Jobs, ManualClock, Worker
from engine.backfill import BackfillRegistry
from engine.retention import DAY_MS, Retention
from engine.testing.kit.test_descriptors import declare
from mcp_jobs.config import Settings
from tests.mcp.conftest import OpenMcp
from tests.mcp.support import audit_log, serve


async def _done(jobs: Jobs, user_id: int, tenant: str | None = None) -> str:
    if tenant is None:
        result = await jobs.enqueue("greet", {"user_id": user_id})
    else:
        result = await jobs.enqueue("receipt", {"order_id": user_id}, tenant_id=tenant)
    await Worker(jobs, queues="*", prune=False).run_until_idle()
    return result.id


async def test_a_dry_run_counts_then_a_write_prunes_and_is_audited(
    jobs: Jobs, clock: ManualClock, open_mcp: OpenMcp, monkeypatch: pytest.MonkeyPatch
) -> None:
    audited = audit_log(jobs, monkeypatch)
    old = await _done(jobs, 1)
    clock.advance(8 * DAY_MS)
    fresh = await _done(jobs, 2)
    async with open_mcp() as mcp:
        plan = await mcp.ok("prune_history", {})
        assert plan["mode"] == "dry_run" and plan["by_state"]["done"] == 1
        assert plan["by_queue"] == [{"state": "done", "queue": "mail", "rows": 1}]
        done_cutoff = next(c for c in plan["cutoffs"] if c["state"] == "done")
        assert done_cutoff["before"] == clock.now_ms() - 7 * DAY_MS
        assert (await jobs.get(old)).state == "done"  # a dry run changes nothing

        pruned = await mcp.ok("prune_history", {"write": True})
        assert pruned["by_state"]["done"] == 1 and pruned["more"] is False
        assert [j.id for j in (await jobs.list(state="done")).jobs] == [fresh]

        everything = await mcp.ok("prune_history", {"write": True, "older_than_seconds": 0})
        assert everything["by_state"]["done"] == 0  # finished exactly now: kept
        clock.advance(1)
        everything = await mcp.ok("prune_history", {"write": True, "older_than_seconds": 0})
        assert everything["by_state"]["done"] == 1
    # The writes are recorded (tool, arguments, outcome); the dry run is a read.
    assert [(a["tool"], a["ok"], a["arguments"]["write"]) for a in audited] == [
        ("prune_history", True, True)
    ] * 3


async def test_a_pinned_server_prunes_only_its_tenant(
    jobs: Jobs, clock: ManualClock, app: JobRegistry, mode: str
) -> None:
    mine = await _done(jobs, 1, tenant="acme")
    theirs = await _done(jobs, 2, tenant="other")
    clock.advance(8 * DAY_MS)
    async with serve(jobs, mode, Settings(tenant="acme")) as mcp:
        plan = await mcp.ok("prune_history", {})
        assert plan["tenant_id"] == "acme" and plan["by_state"]["done"] == 1
        await mcp.ok("prune_history", {"write": True})
    remaining = {j.id for j in (await jobs.list(state="done")).jobs}
    assert mine not in remaining and theirs in remaining


async def test_bad_arguments_are_refused_with_the_tools_envelope(open_mcp: OpenMcp) -> None:
    async with open_mcp() as mcp:
        await mcp.fails("prune_history", {"states": ["ready"]}, "TOOL_ARGUMENTS_INVALID")
        await mcp.fails("prune_history", {"older_than_seconds": -1}, "INVALID_ARGUMENT")


async def test_a_read_only_server_has_no_prune_tool(
    jobs: Jobs, app: JobRegistry, mode: str
) -> None:
    async with serve(jobs, mode, Settings(read_only=True)) as mcp:
        assert "prune_history" not in mcp.schemas
        with pytest.raises(MCPError) as raised:  # not served: JSON-RPC invalid params
            await mcp.client.call_tool("prune_history", {"write": True})
        assert raised.value.code == INVALID_PARAMS


async def test_audit_events_of_no_job_go_by_the_audit_retention_not_by_older_than(
    jobs: Jobs, clock: ManualClock, open_mcp: OpenMcp
) -> None:
    await jobs.record_event("mcp.call", actor="agent")
    clock.advance(90 * DAY_MS + 1)
    await jobs.record_event("mcp.call", actor="agent")
    async with open_mcp() as mcp:
        plan = await mcp.ok("prune_history", {})
        assert plan["audit_events"] == 1
        assert plan["audit_before"] == clock.now_ms() - 90 * DAY_MS and plan["audit_before_iso"]
        # A call about some states (or a tenant's rows) leaves the audit trail alone.
        assert "audit_events" not in await mcp.ok("prune_history", {"states": ["done"]})
        pruned = await mcp.ok("prune_history", {"write": True, "older_than_seconds": 0})
        assert pruned["audit_events"] == 1 and pruned["more"] is False
        assert (await mcp.ok("prune_history", {}))["audit_events"] == 0
    # The young event and the write's own audit stay.
    assert await jobs.driver.count_jobless_events(clock.now_ms() + 1) == 2


async def test_a_server_without_the_app_keeps_what_the_worker_running_a_job_published(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock, mode: str
) -> None:
    """The worker running `charge` keeps done jobs 30 days and events of no job a year; a
    server that has not imported it plans and prunes by that, not by its own defaults."""
    assert len(registry) == 0  # the server's own registry: no app imported
    app = JobRegistry()
    declare(app)
    with_code = Jobs(jobs.driver, registry=app, clock=clock)
    running = Worker(with_code, prune=False, retention=Retention(done="30d", audit="365d"))
    await running.publish_descriptors()
    kept = await with_code.enqueue("charge", {"order_id": 1})
    assert await running.run_until_idle() == 1
    clock.advance(8 * DAY_MS)
    now = clock.now_ms()
    async with serve(jobs, mode, backfills=BackfillRegistry()) as mcp:
        plan = await mcp.ok("prune_history", {})
        charge = {c["state"]: c["before"] for c in plan["cutoffs"] if c.get("name") == "charge"}
        assert charge["done"] == now - 30 * DAY_MS
        assert plan["audit_before"] == now - 365 * DAY_MS
        assert plan["by_state"]["done"] == 0
        pruned = await mcp.ok("prune_history", {"write": True})
        assert pruned["by_state"]["done"] == 0
        assert (await jobs.get(kept.id)).state == "done"
        # `older_than` still replaces every policy for the call it is given to.
        forced = await mcp.ok("prune_history", {"write": True, "older_than_seconds": 86_400})
        assert forced["by_state"]["done"] == 1
