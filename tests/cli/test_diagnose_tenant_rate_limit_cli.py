"""`mcp-jobs jobs diagnose` on a backlog a tenant's rate limit holds back (exploreA2): RATE_LIMITED
naming the tenant's key and rate, no BACKLOG_OLD with a bigger worker for fix; under `--tenant`
the other tenant's name and rate appear nowhere in the answer."""

from __future__ import annotations

import json
import time

import anyio
import pytest
from pydantic import BaseModel

from engine import JobContext, JobRegistry, Limits, ManualClock, RateLimit, Worker, connect, job
from tests.cli.support import run
from tests.support.presence import beat

LIMITS = Limits(rate_per_tenant=RateLimit(1, per=1), rate_tenant_overrides={"acme": RateLimit(5)})
BACKLOG = 80  # per tenant: initech's turns run 80 s, acme's 16 s


class Receipt(BaseModel):
    order_id: int


def _shed_61_s_ago(url: str) -> None:
    """A backlog per tenant enqueued 61 s ago (by the system clock the CLI reads) and claimed
    then by a worker under LIMITS, which shed all but one each; a worker live now."""

    async def go() -> None:
        registry = JobRegistry()

        @job(idempotency_key=lambda i: str(i.order_id), queue="mail", registry=registry)
        async def receipt(input: Receipt, ctx: JobContext) -> None:
            return None

        clock = ManualClock(time.time_ns() // 1_000_000 - 61_000)
        jobs = await connect(url, clock=clock, registry=registry, migrate=True)
        try:
            for n in range(BACKLOG):
                for tenant in ("initech", "acme"):
                    await jobs.enqueue(receipt, Receipt(order_id=n), tenant_id=tenant)
            await Worker(jobs, queues=["mail"], concurrency=8, limits=LIMITS).run_until_idle()
            clock.set(time.time_ns() // 1_000_000)
            await beat(jobs, concurrency=8)
        finally:
            await jobs.close()

    anyio.run(go)


def test_diagnose_names_the_tenant_rate_limit_holding_a_backlog(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _shed_61_s_ago(url)
    db = ["--queue", "mail", "--database-url", url, "--json"]
    code, diagnosis = run(capsys, "jobs", "diagnose", *db)
    assert code == 0
    codes = {f["code"]: f for f in diagnosis["findings"]}
    assert "wait for rate limit tenant:initech (1 per 1s)" in codes["RATE_LIMITED"]["cause"]
    # Acme's limit let its turns go by: its jobs alone wait for workers.
    assert codes["BACKLOG_OLD"]["cause"].startswith(
        f"queue mail has {BACKLOG - 1} ready job(s) under no rate limit"
    )

    code, diagnosis = run(capsys, "jobs", "diagnose", "--tenant", "initech", *db)
    assert code == 0
    codes = {f["code"]: f for f in diagnosis["findings"]}
    assert "BACKLOG_OLD" not in codes, codes["BACKLOG_OLD"]["fix"]
    assert "wait for rate limit tenant:initech (1 per 1s)" in codes["RATE_LIMITED"]["cause"]
    said = json.dumps(diagnosis)
    assert "acme" not in said and "5 per 1s" not in said

    code, text = run(capsys, "jobs", "diagnose", "--tenant", "initech", *db[:-1])
    assert code == 0 and "RATE_LIMITED" in text and "tenant:initech" in text
    assert "BACKLOG_OLD" not in text and "acme" not in text
