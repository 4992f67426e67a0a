"""The SQLite driver mirrors the memory driver call for call, below the client.

One script drives every Protocol method through the awkward cases (nack's four outcomes, a cancel
of a running row, an expired lease, caps and their expiry, leader failover, outbox fences) and
records what each call answered. Both drivers, each on its own manual clock from one start, must
answer identically. Tokens and outbox ids are random, so they are compared by role, not value.
"""

from __future__ import annotations

import inspect
import sqlite3
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from engine import ManualClock
from engine.drivers.base import Driver
from engine.drivers.memory import MemoryDriver
from engine.drivers.sqlite import SqliteDriver
from engine.errors import JobsError
from schemas.backfill import BackfillRun
from schemas.events import EventRecord
from schemas.jobs import EnqueueRequest, JobFilter, NackOptions
from schemas.stats import WorkerInfo
from schemas.steps import StepRecord

START = 1_767_225_600_000
Stage = Callable[[Sequence[EnqueueRequest]], Awaitable[list[str]]]


def request(
    n: int, *, key: str | None = None, tenant: str | None = None, **kw: Any
) -> EnqueueRequest:
    return EnqueueRequest(
        id=f"job{n:04d}",
        run_id=f"run{n:04d}",
        name=kw.pop("name", "send"),
        queue=kw.pop("queue", "default"),
        tenant_id=tenant,
        idempotency_key=key or f"k{n}",
        input={"n": n},
        run_at=kw.pop("run_at", START),
        max_attempts=3,
        **kw,
    )


class Script:
    """Records each call's answer, or its error code."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, Any]] = []

    async def __call__(self, label: str, call: Awaitable[Any] | Any) -> Any:
        try:
            value = await call if inspect.isawaitable(call) else call
        except JobsError as exc:
            self.seen.append((label, exc.code))
            return None
        self.seen.append((label, _plain(value)))
        return value


def _plain(value: Any) -> Any:
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if hasattr(value, "model_dump"):
        dumped = value.model_dump()
        dumped.pop("token", None)  # random per claim
        return dumped
    return value


async def scenario(driver: Driver, clock: ManualClock, stage: Stage) -> list[tuple[str, Any]]:
    s = Script()
    await driver.migrate()
    # enqueue: batch with an in-batch duplicate, a delayed row, two tenants on one key
    await s(
        "enqueue",
        driver.enqueue(
            [
                request(1),
                request(2, key="k1"),
                request(3, run_at=START + 5_000),
                request(4, key="inv", tenant="a", queue="billing"),
                request(5, key="inv", tenant="b", queue="billing"),
                request(6, key="inv", tenant="a", queue="billing"),
                request(9, queue="other"),
            ]
        ),
    )
    await s("dup-error", driver.enqueue([request(7), request(8, key="k1", on_conflict="error")]))
    await s("list-all", driver.list_jobs(JobFilter(limit=100)))
    await s("stats", driver.stats())
    # claim and the lease rules
    claimed = await driver.claim("w1", 2, 1_000)
    await s("claimed", _const(claimed))
    a, b = claimed
    await s("beat", driver.heartbeat(a.record.id, a.token, 2_000))
    await s("beat-bad-token", driver.heartbeat(a.record.id, "nope", 2_000))
    await s("cancel-running", driver.cancel(b.record.id, None, "ops"))
    await s("beat-cancelled", driver.heartbeat(b.record.id, b.token, 2_000))
    await s("ack-cancelled", driver.ack(b.record.id, b.token, {"x": 1}))
    await s("cancel-again", driver.cancel(b.record.id, None, "ops"))
    clock.advance(1_500)
    # a's lease (extended to now+2000 at the beat) still holds; nothing else is due but job0005
    taken = await driver.claim("w2", 10, 1_000, ["billing"])
    await s("claim-billing", _const(taken))
    clock.advance(1_000)
    stolen = await driver.claim("w3", 10, 1_000, ["default"])
    await s("reclaim-expired", _const(stolen))
    await s("ack-stale", driver.ack(a.record.id, a.token, None))
    await s("step-stale", driver.save_step(a.record.id, a.token, _step(a.record.id, "one")))
    (fresh,) = [c for c in stolen if c.record.id == a.record.id]
    await s("step", driver.save_step(fresh.record.id, fresh.token, _step(fresh.record.id, "one")))
    await s("step-2", driver.save_step(fresh.record.id, fresh.token, _step(fresh.record.id, "two")))
    await s(
        "step-again",
        driver.save_step(fresh.record.id, fresh.token, _step(fresh.record.id, "one", 2)),
    )
    await s("steps", driver.load_steps(fresh.record.run_id))
    # nack's outcomes
    await s(
        "nack-retry",
        driver.nack(fresh.record.id, fresh.token, NackOptions(delay_ms=500, error="boom")),
    )
    (c5,) = taken
    await s(
        "nack-shed",
        driver.nack(c5.record.id, c5.token, NackOptions(delay_ms=100, counts_as_attempt=False)),
    )
    await s("stats-shed", driver.stats(["billing"]))
    clock.advance(2_700)
    batch = await driver.claim("w4", 10, 5_000)
    await s("claim-all", _const(batch))
    by_id = {c.record.id: c for c in batch}
    outcomes = [
        NackOptions(delay_ms=10_000, counts_as_attempt=False, park=True),
        NackOptions(error="gone", dead_letter=True),
        NackOptions(error="bad", fail=True),
        NackOptions(),
    ]
    assert len(by_id) == len(outcomes)
    for (job_id, c), options in zip(sorted(by_id.items()), outcomes, strict=True):
        await s(f"nack-{job_id}", driver.nack(job_id, c.token, options))
    await s("stats-after-nacks", driver.stats())
    clock.advance(20_000)
    await s("stats-later", driver.stats())
    # settled rows: retry rules
    page = await driver.list_jobs(JobFilter(states=("dead", "failed", "cancelled"), limit=10))
    for job in page.jobs:
        await s(f"retry-{job.id}", driver.retry(job.id, None, False, "ops"))
        await s(f"retry-cancelled-{job.id}", driver.retry(job.id, None, True, "ops"))
        await s(f"retry-twice-{job.id}", driver.retry(job.id, None, True, "ops"))
    await s("get-tenant", driver.get("job0004", "b"))
    await s("get-tenant-ok", driver.get("job0004", "a"))
    await s("trace", driver.load_trace("job0001"))
    await s("trace-tenant", driver.load_trace("job0004", "b"))
    await driver.record_event(
        EventRecord(job_id=None, at=clock.now_ms(), kind="note", data={"a": 1})
    )
    await s("page-1", driver.list_jobs(JobFilter(limit=2)))
    await s("page-f", driver.list_jobs(JobFilter(queue="billing", tenant_id="a", limit=5)))
    await s("page-c", driver.list_jobs(JobFilter(cursor="job0004", limit=5)))
    await s("page-n", driver.list_jobs(JobFilter(name="nope")))
    # limiter slots
    now = clock.now_ms()
    await s("slot-a", driver.acquire_slots("a", [("q", 2), ("g", 5)], now + 1_000))
    await s("slot-b", driver.acquire_slots("b", [("q", 2), ("g", 5)], now + 1_000))
    await s("slot-c", driver.acquire_slots("c", [("g", 5), ("q", 2)], now + 1_000))
    await s("slot-a-again", driver.acquire_slots("a", [("q", 2)], now + 1_000))
    await driver.release_slots("a")
    await s("slot-c-after-release", driver.acquire_slots("c", [("q", 2)], now + 500))
    clock.advance(1_000)
    await s("slot-d-after-expiry", driver.acquire_slots("d", [("q", 2)], clock.now_ms() + 1))
    # workers
    info = WorkerInfo(
        id="w1", hostname="h", pid=1, queues=["a"], concurrency=4, started_at=1, last_seen_at=10
    )
    await driver.worker_seen(info)
    await driver.worker_seen(
        info.model_copy(update={"id": "w2", "queues": None, "last_seen_at": 5})
    )
    await driver.worker_seen(info.model_copy(update={"last_seen_at": 20}))
    await s("workers", driver.live_workers(6))
    await driver.worker_gone("w1")
    await s("workers-after", driver.live_workers(0))
    # backfill ledger
    run = BackfillRun(
        run_id="r1",
        name="fill",
        checksum="c",
        environment="prod",
        status="running",
        app_version="1",
        rows_processed=0,
        cursor={"after": [1, "x"]},
        started_at=5,
    )
    await driver.backfill_save(run)
    await driver.backfill_save(
        run.model_copy(update={"run_id": "r2", "started_at": 9, "environment": "dev"})
    )
    await driver.backfill_save(
        run.model_copy(update={"status": "completed", "rows_processed": 7, "finished_at": 8})
    )
    await s("backfills", driver.backfill_runs())
    await s("backfills-prod", driver.backfill_runs("fill", "prod"))
    await s("backfills-none", driver.backfill_runs("other"))
    # scheduler
    await s("lead-a", driver.scheduler_lead("a", 1_000))
    await s("lead-b", driver.scheduler_lead("b", 1_000))
    await s("lead-a-renew", driver.scheduler_lead("a", 1_000))
    clock.advance(1_000)
    await s("lead-b-after", driver.scheduler_lead("b", 1_000))
    await s("lead-a-lost", driver.scheduler_lead("a", 1_000))
    await s("task-none", driver.task_state("t"))
    await driver.task_fired("t", 100)
    await driver.task_fired("t", 50)
    await s("task", driver.task_state("t"))
    # outbox
    staged = await stage([request(20), request(21), request(22, key="k1")])
    await s("staged", len(staged))
    first = await driver.outbox_claim("relay1", "t1", 2, 1_000)
    await s("outbox-claim", [r.request.id for r in first])
    await s(
        "outbox-claim-2",
        [r.request.id for r in await driver.outbox_claim("relay2", "t2", 5, 1_000)],
    )
    await s("publish-wrong-token", driver.outbox_publish("t2", first))
    await driver.outbox_release("t2", [r.id for r in first])
    await s("publish", driver.outbox_publish("t1", first))
    await s("publish-again", driver.outbox_publish("t1", first))
    clock.advance(1_000)
    rest = await driver.outbox_claim("relay3", "t3", 5, 1_000)
    await s("outbox-rest", [(r.request.id, r.published_at) for r in rest])
    await driver.outbox_release("t3", [r.id for r in rest])
    again = await driver.outbox_claim("relay4", "t4", 5, 1_000)
    await s("outbox-released", [r.request.id for r in again])
    await s("publish-rest", driver.outbox_publish("t4", again))
    await s("final-list", driver.list_jobs(JobFilter(limit=1000)))
    await s("final-stats", driver.stats())
    return s.seen


async def _const(value: Any) -> Any:
    return value


def _step(job_id: str, name: str, attempts: int = 1) -> StepRecord:
    return StepRecord(
        job_id=job_id,
        run_id="run0001",
        name=name,
        status="completed",
        output={"name": name, "attempts": attempts},
        started_at=START + attempts,
        attempts=attempts,
    )


async def test_sqlite_answers_every_call_as_the_memory_driver_does(tmp_path: Path) -> None:
    memory_clock = ManualClock(START)
    memory = MemoryDriver(memory_clock)

    async def memory_stage(requests: Sequence[EnqueueRequest]) -> list[str]:
        tx = memory.transaction()
        ids = await memory.outbox_stage(tx, requests)
        memory.commit(tx)
        return ids

    expected = await scenario(memory, memory_clock, memory_stage)

    sqlite_clock = ManualClock(START)
    path = tmp_path / "jobs.db"
    driver = SqliteDriver(str(path), clock=sqlite_clock)

    async def sqlite_stage(requests: Sequence[EnqueueRequest]) -> list[str]:
        app = sqlite3.connect(path, isolation_level=None)
        try:
            app.execute("BEGIN")
            ids = await driver.outbox_stage(app, requests)
            app.execute("COMMIT")
        finally:
            app.close()
        return ids

    try:
        actual = await scenario(driver, sqlite_clock, sqlite_stage)
    finally:
        await driver.close()
    assert [label for label, _ in actual] == [label for label, _ in expected]
    for (label, got), (_, want) in zip(actual, expected, strict=True):
        assert got == want, label
