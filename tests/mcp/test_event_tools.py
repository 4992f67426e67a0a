"""`send_event`: wakes the job waiting in ctx.step.wait_for_event, which inspect_job shows as a
waiting step and diagnose_queue does not call a stall; audited, tenant pin respected, absent on
a read-only server."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from engine import JobContext, JobRegistry, Jobs, ManualClock, Worker, job
from mcp_jobs.config import Settings
from mcp_jobs.server import MUTATING_TOOLS
from tests.mcp.conftest import OpenMcp
from tests.mcp.support import audit_log


class Invoice(BaseModel):
    invoice_id: int


def _declare_waiter(registry: JobRegistry) -> None:
    @job(idempotency_key=lambda i: f"inv:{i.invoice_id}", queue="billing", registry=registry)
    async def await_approval(input: Invoice, ctx: JobContext) -> Any:
        outcome = await ctx.step.wait_for_event(
            "invoice.approved", match=str(input.invoice_id), timeout=3600
        )
        return outcome.payload if outcome.received else "timed out"


async def test_send_event_wakes_the_waiting_job_and_is_audited(
    jobs: Jobs,
    app: JobRegistry,
    clock: ManualClock,
    open_mcp: OpenMcp,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    audited = audit_log(jobs, monkeypatch)
    _declare_waiter(app)
    made = await jobs.enqueue("await_approval", {"invoice_id": 5})
    worker = Worker(jobs)
    await worker.run_until_idle()
    async with open_mcp() as mcp:
        inspected = await mcp.ok("inspect_job", {"job_id": made.id})
        assert inspected["job"]["state"] == "suspended"
        (step,) = inspected["steps"]
        assert (step["name"], step["status"]) == ("event:invoice.approved", "waiting")
        assert step["output"]["event"] == "invoice.approved" and step["output"]["key"] == "5"
        assert step["output"]["timeout_at"] == clock.now_ms() + 3_600_000
        clock.advance(600_000)  # long past the backlog threshold, but not due: not a stall
        diagnosis = await mcp.ok("diagnose_queue", {"queue": "billing"})
        assert not [f for f in diagnosis["findings"] if f["code"] == "SUSPENSIONS_OVERDUE"]

        sent = await mcp.ok(
            "send_event", {"name": "invoice.approved", "key": "5", "payload": {"by": "ann"}}
        )
        assert sent["woken"] == 1 and isinstance(sent["event_id"], str)
        again = await mcp.ok("send_event", {"name": "invoice.approved", "key": "6"})
        assert again["woken"] == 0
        await mcp.fails("send_event", {"name": "", "key": "5"}, "INVALID_ARGUMENT")
    assert await worker.run_until_idle() == 1
    done = await jobs.get(made.id)
    assert (done.state, done.output) == ("done", {"by": "ann"})
    assert [(a["tool"], a["ok"]) for a in audited] == [
        ("send_event", True),
        ("send_event", True),
        ("send_event", False),
    ]
    assert audited[0]["arguments"]["key"] == "5"


async def test_a_pinned_server_sends_for_its_tenant_only(
    jobs: Jobs, app: JobRegistry, open_mcp: OpenMcp
) -> None:
    _declare_waiter(app)
    ours = await jobs.enqueue("await_approval", {"invoice_id": 1}, tenant_id="acme")
    theirs = await jobs.enqueue("await_approval", {"invoice_id": 1}, tenant_id="globex")
    worker = Worker(jobs)
    await worker.run_until_idle()
    async with open_mcp(Settings(tenant="acme")) as mcp:
        await mcp.fails(
            "send_event",
            {"name": "invoice.approved", "key": "1", "tenant_id": "globex"},
            "TENANT_PINNED",
        )
        sent = await mcp.ok("send_event", {"name": "invoice.approved", "key": "1"})
        assert sent["woken"] == 1 and sent["tenant_id"] == "acme"
    await worker.run_until_idle()
    assert (await jobs.get(ours.id)).state == "done"
    assert (await jobs.get(theirs.id)).state == "suspended"


async def test_send_event_is_mutating_not_idempotent_and_absent_when_read_only(
    open_mcp: OpenMcp,
) -> None:
    assert "send_event" in MUTATING_TOOLS
    async with open_mcp() as mcp:
        tools = {t.name: t for t in (await mcp.client.list_tools()).tools}
        hints = tools["send_event"].annotations
        assert hints is not None and hints.read_only_hint is False
        assert hints.idempotent_hint is False and hints.destructive_hint is False
    async with open_mcp(Settings(read_only=True)) as mcp:
        assert "send_event" not in mcp.schemas


async def test_a_payload_over_the_events_bound_says_the_bound_is_fixed(open_mcp: OpenMcp) -> None:
    """An event's payload has a fixed bound; the refusal said MCP_JOBS_MAX_PAYLOAD_BYTES set it
    (that variable bounds a job's input; raising it changed nothing for an event)."""
    async with open_mcp() as mcp:
        given = {"name": "invoice.approved", "key": "5", "payload": {"doc": "x" * 70_000}}
        error = await mcp.fails("send_event", given, "INVALID_ARGUMENT")
        assert "MCP_JOBS_MAX_PAYLOAD_BYTES" not in error["cause"], error
        assert "at most 65536 bytes of JSON (an event carries a signal" in error["cause"], error
        assert (
            error["fix"]
            == 'send_event {"name": "invoice.approved", "key": "5", "payload": "<payload>"}'
        )


async def test_diagnose_names_the_events_awaited_and_send_event_the_one_meant(
    jobs: Jobs, app: JobRegistry, clock: ManualClock, open_mcp: OpenMcp
) -> None:
    """A job waiting for an event hours on end is no stall (it times out by itself), but an agent
    asking why it has not run needs to see what it waits for; and a send that wakes nothing
    because of a slip in the name should say which names jobs wait for."""
    _declare_waiter(app)
    made = await jobs.enqueue("await_approval", {"invoice_id": 5})
    await Worker(jobs).run_until_idle()
    clock.advance(600_000)
    async with open_mcp() as mcp:
        diagnosis = await mcp.ok("diagnose_queue", {"queue": "billing"})
        assert diagnosis["healthy"] is True
        (awaited,) = [f for f in diagnosis["findings"] if f["code"] == "EVENTS_AWAITED"]
        assert (awaited["severity"], awaited["queue"]) == ("info", "billing")
        assert '"invoice.approved"' in awaited["cause"] and "600 s" in awaited["cause"]
        assert awaited["job_ids"] == [made.id]
        assert " events send invoice.approved 5" in awaited["fix"], awaited
        assert awaited["next_call"] == {"tool": "inspect_job", "arguments": {"job_id": made.id}}

        missed = await mcp.ok("send_event", {"name": "invoice.aproved", "key": "5"})
        assert missed["woken"] == 0
        (notice,) = missed["notices"]
        assert (notice["code"], notice["severity"]) == ("EVENT_NOT_AWAITED", "warning")
        assert "(meant invoice.approved?)" in notice["cause"], notice
        assert " events send invoice.approved 5" in notice["fix"] and "next_call" not in notice
        # Another key of a name awaited: kept for a later wait, said as info.
        other = await mcp.ok("send_event", {"name": "invoice.approved", "key": "6"})
        (info,) = other["notices"]
        assert info["severity"] == "info" and '"5"' in info["cause"], info
        woke = await mcp.ok("send_event", {"name": "invoice.approved", "key": "5"})
        assert woke["woken"] == 1 and "notices" not in woke
