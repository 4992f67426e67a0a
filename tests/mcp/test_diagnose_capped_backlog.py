"""An old backlog held at a concurrency cap: a bigger worker would start none of it, so
`diagnose_queue`'s BACKLOG_OLD says which cap holds it, rather than handing out a worker line that
changes nothing. A job's own cap: the fix raises it. A worker's `Limits` (published with its
presence): the fix lists the running jobs that hold the slots. A backlog no cap holds keeps the
worker line."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from engine import JobContext, JobRegistry, Jobs, ManualClock, job
from tests.mcp.conftest import OpenMcp
from tests.support.fix_lines import command_words
from tests.support.presence import beat

CAP = 2
LEASE_MS = 600_000  # the running jobs' workers are alive for the whole test


class Order(BaseModel):
    n: int


async def _backlog(
    jobs: Jobs,
    registry: JobRegistry,
    cap: int | None,
    running: int,
    tenants: tuple[str | None, ...] = (None,),
) -> None:
    @job(
        name="capped_fulfil",
        idempotency_key=lambda i: f"o:{i.n}",
        queue="capped",
        concurrency=cap,
        registry=registry,
    )
    async def fulfil(input: Order, ctx: JobContext) -> None: ...

    for n in range(6):
        await jobs.enqueue("capped_fulfil", {"n": n}, tenant_id=tenants[n % len(tenants)])
    claimed = await jobs.driver.claim("w-cap", running, LEASE_MS, ["capped"])
    assert len(claimed) == running


async def _backlog_old(
    jobs: Jobs,
    clock: ManualClock,
    open_mcp: OpenMcp,
    caps: dict[str, int] | None = None,
    *,
    uncapped_too: bool = False,
) -> dict[str, Any]:
    clock.advance(61_000)
    await beat(jobs, "w-cap", concurrency=16, caps=caps)
    if uncapped_too:
        await beat(jobs, "w-free", concurrency=16)
    async with open_mcp() as mcp:
        diagnosis = await mcp.ok("diagnose_queue", {"queue": "capped"})
    (finding,) = [f for f in diagnosis["findings"] if f["code"] == "BACKLOG_OLD"]
    return finding  # type: ignore[no-any-return]


async def test_a_backlog_held_at_its_jobs_cap_says_so_and_raises_the_cap(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock, open_mcp: OpenMcp
) -> None:
    await _backlog(jobs, registry, CAP, running=CAP)
    finding = await _backlog_old(jobs, clock, open_mcp)
    assert "concurrency cap" in finding["cause"] and "capped_fulfil" in finding["cause"]
    assert f"{CAP} running of {CAP}" in finding["cause"]
    assert finding["fix"] == f'@job(concurrency={CAP * 2}) on "capped_fulfil"'


async def test_a_backlog_below_its_cap_keeps_the_worker_line(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock, open_mcp: OpenMcp
) -> None:
    await _backlog(jobs, registry, CAP, running=CAP - 1)
    finding = await _backlog_old(jobs, clock, open_mcp)
    assert "mcp-jobs worker" in finding["fix"] and "--queues capped" in finding["fix"]


async def test_a_backlog_held_at_a_workers_queue_cap_lists_the_jobs_holding_its_slots(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock, open_mcp: OpenMcp
) -> None:
    await _backlog(jobs, registry, None, running=2)
    finding = await _backlog_old(jobs, clock, open_mcp, {"queue:capped": 2})
    assert "every ready job waits for a full concurrency cap" in finding["cause"], finding
    assert "queue capped (2 running of 2, Limits.per_queue)" in finding["cause"]
    assert "mcp-jobs worker" not in finding["fix"]
    assert finding["next_call"] == {
        "tool": "list_jobs",
        "arguments": {"queue": "capped", "state": "running"},
    }
    assert "mcp-jobs jobs ls --queue capped --state running --json" in finding["fix"]
    async with open_mcp() as mcp:  # the call, as an agent makes it: the jobs holding the slots
        listed = await mcp.ok(finding["next_call"]["tool"], finding["next_call"]["arguments"])
    assert [j["state"] for j in listed["jobs"]] == ["running", "running"]


async def test_a_backlog_held_at_the_global_cap_says_so(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock, open_mcp: OpenMcp
) -> None:
    await _backlog(jobs, registry, None, running=2)
    finding = await _backlog_old(jobs, clock, open_mcp, {"global": 2})
    assert "all queues (2 running of 2, Limits.global_cap)" in finding["cause"], finding


async def test_a_tenant_at_its_cap_holds_only_its_own_jobs(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock, open_mcp: OpenMcp
) -> None:
    """acme runs 2 of its 2; beta's jobs wait for workers: the worker line stays, and the cause
    says how many of the ready jobs the full cap holds."""
    await _backlog(jobs, registry, None, running=2, tenants=("acme", "acme", "beta"))
    finding = await _backlog_old(jobs, clock, open_mcp, {"tenant": 2})
    assert "mcp-jobs worker" in finding["fix"], finding
    assert "tenant acme (2 running of 2, Limits.per_tenant)" in finding["cause"]
    assert "2 of the 4 newest wait for a full cap" in finding["cause"]


async def test_a_serving_worker_without_the_cap_could_start_them(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock, open_mcp: OpenMcp
) -> None:
    """Two live workers serve the queue, one capped and one not: the second could start the
    backlog, so no cap is said to hold it."""
    await _backlog(jobs, registry, None, running=2)
    finding = await _backlog_old(jobs, clock, open_mcp, {"queue:capped": 2}, uncapped_too=True)
    assert "mcp-jobs worker" in finding["fix"] and "Limits" not in finding["cause"], finding
    # The line keeps the capped worker's cap: without it, it would start past that cap.
    assert "--per-queue capped=2" in finding["fix"], finding["fix"]


async def test_a_worker_line_keeps_the_caps_of_the_live_workers_it_joins(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock, open_mcp: OpenMcp
) -> None:
    """LEASES_EXPIRED's worker line, run as given, starts a worker beside capped ones: without
    their caps it would run what they hold back."""

    @job(
        name="capped_fulfil",
        idempotency_key=lambda i: f"o:{i.n}",
        queue="capped",
        registry=registry,
    )
    async def fulfil(input: Order, ctx: JobContext) -> None: ...

    await jobs.enqueue("capped_fulfil", {"n": 1})
    assert len(await jobs.driver.claim("w-gone", 1, 1_000, ["capped"])) == 1
    clock.advance(61_000)  # its lease ran out
    await beat(
        jobs, "w-cap", concurrency=16, caps={"queue:capped": 2, "tenant": 1, "tenant:acme": 3}
    )
    async with open_mcp() as mcp:
        diagnosis = await mcp.ok("diagnose_queue", {"queue": "capped"})
    (finding,) = [f for f in diagnosis["findings"] if f["code"] == "LEASES_EXPIRED"]
    words = command_words(finding["fix"])
    assert words is not None and "worker" in words, finding["fix"]
    flags = words[words.index("worker") :]
    assert "--per-queue capped=2 --per-tenant 1 --per-tenant acme=3" in " ".join(flags), flags
