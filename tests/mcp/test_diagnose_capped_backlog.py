"""An old backlog of a job held at its own concurrency cap: a bigger worker would start none of
it, so `diagnose_queue`'s BACKLOG_OLD says the cap holds it and its fix raises the cap, rather
than handing out a worker line that changes nothing. A backlog no cap holds keeps the worker
line."""

from __future__ import annotations

from pydantic import BaseModel

from engine import JobContext, JobRegistry, Jobs, ManualClock, job
from schemas.stats import WorkerInfo
from tests.mcp.conftest import OpenMcp

CAP = 2
LEASE_MS = 600_000  # the running jobs' workers are alive for the whole test


class Order(BaseModel):
    n: int


async def _beat(jobs: Jobs) -> None:
    now = jobs.clock.now_ms()
    info = WorkerInfo(
        id="w-cap", hostname="test", pid=0, queues=None, concurrency=16,
        started_at=now, last_seen_at=now,
    )  # fmt: skip
    await jobs.driver.worker_seen(info)


async def _backlog(jobs: Jobs, registry: JobRegistry, cap: int | None, running: int) -> None:
    @job(
        name="capped_fulfil",
        idempotency_key=lambda i: f"o:{i.n}",
        queue="capped",
        concurrency=cap,
        registry=registry,
    )
    async def fulfil(input: Order, ctx: JobContext) -> None: ...

    for n in range(6):
        await jobs.enqueue("capped_fulfil", {"n": n})
    claimed = await jobs.driver.claim("w-cap", running, LEASE_MS, ["capped"])
    assert len(claimed) == running


async def _backlog_old(jobs: Jobs, clock: ManualClock, open_mcp: OpenMcp) -> dict[str, str]:
    clock.advance(61_000)
    await _beat(jobs)
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
