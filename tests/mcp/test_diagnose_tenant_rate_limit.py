"""A backlog a tenant's rate limit (a worker's `Limits(rate_per_tenant=…)`) holds back: the limit
spans queues, so `queue_stats` lists it apart from each queue's, yet `diagnose_queue` says
RATE_LIMITED in the queue whose ready jobs it holds, naming the tenant's key and rate, and does
not call them BACKLOG_OLD with a bigger worker for fix (exploreA2). A server pinned to a tenant
names its own tenant's limit only; a job's keyed limit is named by the job there, never by the
computed key (app data)."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel

from engine import JobContext, JobRegistry, Jobs, Limits, ManualClock, RateLimit, Worker, job
from mcp_jobs.config import Settings
from tests.mcp.conftest import OpenMcp
from tests.support.presence import beat

# Initech (as any tenant without an override) starts a job a second, acme five.
LIMITS = Limits(rate_per_tenant=RateLimit(1, per=1), rate_tenant_overrides={"acme": RateLimit(5)})
# Per tenant: initech's turns run 80 s, acme's 16 s; both backlogs fit one page of ready jobs.
BACKLOG = 80
PAST_THRESHOLD_MS = 61_000  # diagnose_queue's backlog age is 60 s


async def _shed(jobs: Jobs, queue: str = "mail") -> None:
    """A backlog per tenant, claimed by a worker under LIMITS: one start each, the rest shed
    to their reserved turns."""
    for n in range(BACKLOG):
        for tenant in ("initech", "acme"):
            await jobs.enqueue("receipt", {"order_id": n}, tenant_id=tenant)
    await Worker(jobs, queues=[queue], concurrency=8, limits=LIMITS).run_until_idle()


def _codes(diagnosis: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f["code"]: f for f in diagnosis["findings"]}


async def test_a_tenant_rate_limit_holding_a_backlog_is_rate_limited_not_an_old_backlog(
    jobs: Jobs, clock: ManualClock, open_mcp: OpenMcp
) -> None:
    await _shed(jobs)
    clock.advance(11_000)  # both tenants' turns still reserved ahead
    await beat(jobs, concurrency=8)
    async with open_mcp() as mcp:
        codes = _codes(await mcp.ok("diagnose_queue", {"queue": "mail"}))
    rated = codes["RATE_LIMITED"]
    assert rated["severity"] == "info" and rated["queue"] == "mail"
    assert "wait for rate limit tenant:initech (1 per 1s)" in rated["cause"]
    assert "tenant:acme (5 per 1s) hold some of them back too" in rated["cause"]
    assert "more workers would not start them sooner" in rated["cause"]
    assert "limits --json" in rated["fix"]

    clock.advance(PAST_THRESHOLD_MS - 11_000)  # initech's turns run on; acme's are over
    await beat(jobs, concurrency=8)
    async with open_mcp() as mcp:
        codes = _codes(await mcp.ok("diagnose_queue", {"queue": "mail"}))
    rated = codes["RATE_LIMITED"]
    assert "wait for rate limit tenant:initech (1 per 1s)" in rated["cause"]
    assert "tenant:acme" not in rated["cause"]
    # Acme's jobs, which no limit holds now, wait for workers: they alone are an old backlog.
    backlog = codes["BACKLOG_OLD"]
    assert backlog["cause"].startswith(
        f"queue mail has {BACKLOG - 1} ready job(s) under no rate limit"
    )


async def test_a_pinned_diagnosis_names_its_own_tenants_limit_and_no_other(
    jobs: Jobs, clock: ManualClock, open_mcp: OpenMcp
) -> None:
    await _shed(jobs)
    clock.advance(11_000)
    await beat(jobs, concurrency=8)
    async with open_mcp(Settings(tenant="acme")) as mcp:
        diagnosis = await mcp.ok("diagnose_queue", {"queue": "mail"})
    said = json.dumps(diagnosis)
    assert "tenant:acme (5 per 1s)" in _codes(diagnosis)["RATE_LIMITED"]["cause"]
    assert "initech" not in said and "1 per 1s" not in said

    clock.advance(PAST_THRESHOLD_MS - 11_000)
    await beat(jobs, concurrency=8)
    async with open_mcp(Settings(tenant="initech")) as mcp:
        diagnosis = await mcp.ok("diagnose_queue", {"queue": "mail"})
    codes, said = _codes(diagnosis), json.dumps(diagnosis)
    assert "BACKLOG_OLD" not in codes, codes["BACKLOG_OLD"]["fix"]
    rated = codes["RATE_LIMITED"]
    assert rated["cause"].startswith(f"{BACKLOG - 1} ready job(s) in queue mail")
    assert "wait for rate limit tenant:initech (1 per 1s)" in rated["cause"]
    assert "acme" not in said and "5 per 1s" not in said
    async with open_mcp(Settings(tenant="acme")) as mcp:
        diagnosis = await mcp.ok("diagnose_queue", {"queue": "mail"})
    codes, said = _codes(diagnosis), json.dumps(diagnosis)
    # Acme's own limit holds nothing now: its backlog waits for workers.
    assert "RATE_LIMITED" not in codes and "BACKLOG_OLD" in codes
    assert "initech" not in said and "1 per 1s" not in said


async def test_a_tenant_limit_is_not_named_in_a_queue_it_holds_nothing_of(
    jobs: Jobs, clock: ManualClock, open_mcp: OpenMcp
) -> None:
    await _shed(jobs)
    await jobs.enqueue("fulfil", {"order_id": 1}, tenant_id="globex")  # queue orders
    clock.advance(PAST_THRESHOLD_MS)
    await beat(jobs, concurrency=8)
    async with open_mcp() as mcp:
        diagnosis = await mcp.ok("diagnose_queue", {})
    rated = [f["queue"] for f in diagnosis["findings"] if f["code"] == "RATE_LIMITED"]
    old = {f["queue"] for f in diagnosis["findings"] if f["code"] == "BACKLOG_OLD"}
    assert rated == ["mail"] and "orders" in old


class Bill(BaseModel):
    customer: str
    n: int


async def test_a_keyed_job_limit_holding_a_pinned_backlog_is_named_by_its_job(
    jobs: Jobs, clock: ManualClock, open_mcp: OpenMcp, app: JobRegistry
) -> None:
    @job(
        idempotency_key=lambda i: f"{i.customer}:{i.n}",
        queue="bills",
        rate_limit=RateLimit(1, per=1, key=lambda i: i.customer),
        registry=app,
    )
    async def bill(input: Bill, ctx: JobContext) -> None:
        return None

    for n in range(BACKLOG):
        for tenant in ("initech", "globex"):
            await jobs.enqueue(bill, Bill(customer=f"cust-{tenant}", n=n), tenant_id=tenant)
    await Worker(jobs, queues=["bills"], concurrency=8).run_until_idle()
    clock.advance(PAST_THRESHOLD_MS)
    await beat(jobs, concurrency=8)
    async with open_mcp() as mcp:
        codes = _codes(await mcp.ok("diagnose_queue", {"queue": "bills"}))
    assert "BACKLOG_OLD" not in codes, codes["BACKLOG_OLD"]["fix"]
    assert "wait for rate limit job:bill:cust-" in codes["RATE_LIMITED"]["cause"]
    async with open_mcp(Settings(tenant="initech")) as mcp:
        diagnosis = await mcp.ok("diagnose_queue", {"queue": "bills"})
    codes, said = _codes(diagnosis), json.dumps(diagnosis)
    assert "BACKLOG_OLD" not in codes, codes["BACKLOG_OLD"]["fix"]
    rated = codes["RATE_LIMITED"]
    assert rated["cause"].startswith(f"{BACKLOG - 1} ready job(s) in queue bills")
    assert "wait for rate limit job:bill (1 per 1s, per key)" in rated["cause"]
    assert "cust-" not in said and "globex" not in said
