"""Every driver answers the Protocol call for call as the memory driver (the reference) does.

Each scenario drives the Protocol directly (below the client and the worker) on a MemoryDriver
and on the driver under test, each with its own manual clock started at the same instant, and
records everything observable: records, results, stats, events, error codes and details. The
two transcripts must be equal. Tokens (and outbox ids) are random per driver and are left out.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import pytest
from pydantic import BaseModel

from engine import ManualClock
from engine.drivers import open_driver
from engine.drivers.base import AckWrite, Driver, StepWrite
from engine.drivers.memory import MemoryDriver
from engine.errors import JobsError
from engine.tasks.scheduler import lease_name
from engine.testing.plugin import AppTransaction, builtin_app_transaction
from schemas.backfill import BackfillRun
from schemas.errors import ErrorPayload
from schemas.events import EventRecord
from schemas.jobs import EnqueueRequest, JobFilter, NackOptions
from schemas.stats import WorkerInfo
from schemas.steps import StepRecord

START = 1_767_225_600_000
Transcript = list[Any]
Stage = Callable[[Sequence[EnqueueRequest]], Awaitable[list[str]]]
Scenario = Callable[[Driver, ManualClock, Transcript, Stage], Awaitable[None]]


def rid(n: int) -> str:
    return f"{n:032x}"


def req(now: int, n: int, **fields: Any) -> EnqueueRequest:
    values: dict[str, Any] = {
        "id": rid(n),
        "run_id": rid(1000 + n),
        "name": "work",
        "queue": "default",
        "idempotency_key": f"k{n}",
        "input": {"n": n},
        "run_at": now,
        "max_attempts": 3,
    }
    values.update(fields)
    return EnqueueRequest(**values)


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


def seen(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(exclude={"token"})
    if isinstance(value, list | tuple):
        return [seen(v) for v in value]
    return value


async def note(log: Transcript, label: str, call: Awaitable[Any] | Any) -> Any:
    try:
        value = await call if inspect.isawaitable(call) else call
    except JobsError as exc:
        log.append((label, "error", exc.code, exc.details))
        return None
    log.append((label, seen(value)))
    return value


async def ack(driver: Driver, job_id: str, token: str, output: Any = None) -> None:
    (outcome,) = await driver.ack_many([AckWrite(job_id, token, output)])
    if outcome is not None:
        raise outcome


async def save_step(driver: Driver, job_id: str, token: str, step: StepRecord) -> None:
    (outcome,) = await driver.save_steps_many([StepWrite(job_id, token, step)])
    if outcome is not None:
        raise outcome


def failure(cause: str) -> ErrorPayload:
    return ErrorPayload(
        code="JOB_FAILED", title="the job's body raised", cause=cause, fix="fix", retryable=True
    )


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


async def walkthrough(driver: Driver, clock: ManualClock, log: Transcript, stage: Stage) -> None:
    """One script through the awkward cases: nack's four outcomes, a cancel of a running row, an
    expired lease, caps and their expiry, leader failover, outbox fences."""
    # enqueue: batch with an in-batch duplicate, a delayed row, two tenants on one key
    await note(
        log,
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
    await note(
        log, "dup-error", driver.enqueue([request(7), request(8, key="k1", on_conflict="error")])
    )
    await note(log, "list-all", driver.list_jobs(JobFilter(limit=100)))
    await note(log, "stats", driver.stats())
    # claim and the lease rules
    claimed = await driver.claim("w1", 2, 1_000)
    log.append(("claimed", seen(claimed)))
    a, b = claimed
    await note(log, "beat", driver.heartbeat(a.record.id, a.token, 2_000))
    await note(log, "beat-bad-token", driver.heartbeat(a.record.id, "nope", 2_000))
    await note(log, "cancel-running", driver.cancel(b.record.id, None, "ops"))
    await note(log, "beat-cancelled", driver.heartbeat(b.record.id, b.token, 2_000))
    await note(log, "ack-cancelled", ack(driver, b.record.id, b.token, {"x": 1}))
    await note(log, "cancel-again", driver.cancel(b.record.id, None, "ops"))
    clock.advance(1_500)
    # a's lease (extended to now+2000 at the beat) still holds; nothing else is due but job0005
    taken = await driver.claim("w2", 10, 1_000, ["billing"])
    log.append(("claim-billing", seen(taken)))
    clock.advance(1_000)
    stolen = await driver.claim("w3", 10, 1_000, ["default"])
    log.append(("reclaim-expired", seen(stolen)))
    await note(log, "ack-stale", ack(driver, a.record.id, a.token, None))
    await note(
        log, "step-stale", save_step(driver, a.record.id, a.token, _step(a.record.id, "one"))
    )
    (fresh,) = [c for c in stolen if c.record.id == a.record.id]
    await note(
        log, "step", save_step(driver, fresh.record.id, fresh.token, _step(fresh.record.id, "one"))
    )
    await note(
        log,
        "step-2",
        save_step(driver, fresh.record.id, fresh.token, _step(fresh.record.id, "two")),
    )
    await note(
        log,
        "step-again",
        save_step(driver, fresh.record.id, fresh.token, _step(fresh.record.id, "one", 2)),
    )
    await note(log, "steps", driver.load_steps(fresh.record.run_id))
    # nack's outcomes
    await note(
        log,
        "nack-retry",
        driver.nack(fresh.record.id, fresh.token, NackOptions(delay_ms=500, error=failure("boom"))),
    )
    (c5,) = taken
    await note(
        log,
        "nack-shed",
        driver.nack(c5.record.id, c5.token, NackOptions(delay_ms=100, counts_as_attempt=False)),
    )
    await note(log, "stats-shed", driver.stats(["billing"]))
    clock.advance(2_700)
    batch = await driver.claim("w4", 10, 5_000)
    log.append(("claim-all", seen(batch)))
    by_id = {c.record.id: c for c in batch}
    outcomes = [
        NackOptions(delay_ms=10_000, counts_as_attempt=False, park=True),
        NackOptions(error=failure("gone"), dead_letter=True),
        NackOptions(error=failure("bad"), fail=True),
        NackOptions(),
    ]
    assert len(by_id) == len(outcomes)
    for (job_id, c), options in zip(sorted(by_id.items()), outcomes, strict=True):
        await note(log, f"nack-{job_id}", driver.nack(job_id, c.token, options))
    await note(log, "stats-after-nacks", driver.stats())
    clock.advance(20_000)
    await note(log, "stats-later", driver.stats())
    # settled rows: retry rules
    page = await driver.list_jobs(JobFilter(states=("dead", "failed", "cancelled"), limit=10))
    for job in page.jobs:
        await note(log, f"retry-{job.id}", driver.retry(job.id, None, False, "ops"))
        await note(log, f"retry-cancelled-{job.id}", driver.retry(job.id, None, True, "ops"))
        await note(log, f"retry-twice-{job.id}", driver.retry(job.id, None, True, "ops"))
    await note(log, "get-tenant", driver.get("job0004", "b"))
    await note(log, "get-tenant-ok", driver.get("job0004", "a"))
    await note(log, "trace", driver.load_trace("job0001"))
    await note(log, "trace-tenant", driver.load_trace("job0004", "b"))
    await driver.record_event(
        EventRecord(job_id=None, at=clock.now_ms(), kind="note", data={"a": 1})
    )
    await note(log, "page-1", driver.list_jobs(JobFilter(limit=2)))
    await note(log, "page-f", driver.list_jobs(JobFilter(queue="billing", tenant_id="a", limit=5)))
    await note(log, "page-c", driver.list_jobs(JobFilter(cursor="job0004", limit=5)))
    await note(log, "page-n", driver.list_jobs(JobFilter(name="nope")))
    # limiter slots
    now = clock.now_ms()
    await note(log, "slot-a", driver.acquire_slots("a", [("q", 2), ("g", 5)], now + 1_000))
    await note(log, "slot-b", driver.acquire_slots("b", [("q", 2), ("g", 5)], now + 1_000))
    await note(log, "slot-c", driver.acquire_slots("c", [("g", 5), ("q", 2)], now + 1_000))
    await note(log, "slot-a-again", driver.acquire_slots("a", [("q", 2)], now + 1_000))
    await driver.release_slots("a")
    await note(log, "slot-c-after-release", driver.acquire_slots("c", [("q", 2)], now + 500))
    clock.advance(1_000)
    await note(
        log, "slot-d-after-expiry", driver.acquire_slots("d", [("q", 2)], clock.now_ms() + 1)
    )
    # workers
    info = WorkerInfo(
        id="w1", hostname="h", pid=1, queues=["a"], concurrency=4, started_at=1, last_seen_at=10
    )
    await driver.worker_seen(info)
    await driver.worker_seen(
        info.model_copy(update={"id": "w2", "queues": None, "last_seen_at": 5})
    )
    await driver.worker_seen(info.model_copy(update={"last_seen_at": 20}))
    await note(log, "workers", driver.live_workers(6))
    await driver.worker_gone("w1")
    await note(log, "workers-after", driver.live_workers(0))
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
    await note(log, "backfills", driver.backfill_runs())
    await note(log, "backfills-prod", driver.backfill_runs("fill", "prod"))
    await note(log, "backfills-none", driver.backfill_runs("other"))
    # scheduler
    await note(log, "lead-a", driver.lead(lease_name("t"), "a", 1_000))
    await note(log, "lead-b", driver.lead(lease_name("t"), "b", 1_000))
    await note(log, "lead-a-renew", driver.lead(lease_name("t"), "a", 1_000))
    clock.advance(1_000)
    await note(log, "lead-b-after", driver.lead(lease_name("t"), "b", 1_000))
    await note(log, "lead-a-lost", driver.lead(lease_name("t"), "a", 1_000))
    await note(log, "task-none", driver.task_state("t"))
    await note(log, "claim-first", driver.task_claim("t", None, 100))
    await note(log, "claim-stale", driver.task_claim("t", None, 50))
    await note(log, "claim-back", driver.task_claim("t", 100, 50))
    await note(log, "task", driver.task_state("t"))
    # outbox
    staged = await stage([request(20), request(21), request(22, key="k1")])
    await note(log, "staged", len(staged))
    first = await driver.outbox_claim("relay1", "t1", 2, 1_000)
    await note(log, "outbox-claim", [r.request.id for r in first])
    await note(
        log,
        "outbox-claim-2",
        [r.request.id for r in await driver.outbox_claim("relay2", "t2", 5, 1_000)],
    )
    await note(log, "publish-wrong-token", driver.outbox_publish("t2", first))
    await driver.outbox_release("t2", [r.id for r in first])
    await note(log, "publish", driver.outbox_publish("t1", first))
    await note(log, "publish-again", driver.outbox_publish("t1", first))
    clock.advance(1_000)
    rest = await driver.outbox_claim("relay3", "t3", 5, 1_000)
    await note(log, "outbox-rest", [(r.request.id, r.published_at) for r in rest])
    await driver.outbox_release("t3", [r.id for r in rest])
    again = await driver.outbox_claim("relay4", "t4", 5, 1_000)
    await note(log, "outbox-released", [r.request.id for r in again])
    await note(log, "publish-rest", driver.outbox_publish("t4", again))
    await note(log, "final-list", driver.list_jobs(JobFilter(limit=1000)))
    await note(log, "final-stats", driver.stats())


async def settling(driver: Driver, clock: ManualClock, log: Transcript, stage: Stage) -> None:
    now = clock.now_ms()
    await note(log, "enqueue", driver.enqueue([req(now, n) for n in range(8)]))
    await note(log, "enqueue-later", driver.enqueue([req(now, 8, run_at=now + 5_000)]))
    claimed = await driver.claim("w1", 8, 10_000)
    log.append(("claimed", seen(claimed)))
    tokens = {c.record.id: c.token for c in claimed}
    await note(
        log,
        "shed",
        driver.nack(rid(0), tokens[rid(0)], NackOptions(delay_ms=500, counts_as_attempt=False)),
    )
    await note(
        log,
        "park",
        driver.nack(
            rid(1),
            tokens[rid(1)],
            NackOptions(
                delay_ms=1_000, error=failure("sleeping"), counts_as_attempt=False, park=True
            ),
        ),
    )
    await note(
        log,
        "retry",
        driver.nack(rid(2), tokens[rid(2)], NackOptions(delay_ms=2_000, error=failure("boom"))),
    )
    await note(
        log, "retry-now", driver.nack(rid(3), tokens[rid(3)], NackOptions(error=failure("now")))
    )
    await note(
        log,
        "dead",
        driver.nack(rid(4), tokens[rid(4)], NackOptions(error=failure("gone"), dead_letter=True)),
    )
    await note(log, "fail", driver.nack(rid(5), tokens[rid(5)], NackOptions(fail=True)))
    await note(log, "ack", ack(driver, rid(6), tokens[rid(6)], {"out": [1, 2]}))
    await note(log, "ack-again", ack(driver, rid(6), tokens[rid(6)]))
    await note(log, "nack-settled", driver.nack(rid(5), tokens[rid(5)], NackOptions()))
    await note(log, "beat", driver.heartbeat(rid(7), tokens[rid(7)], 20_000))
    await note(log, "beat-lost", driver.heartbeat(rid(0), tokens[rid(0)], 20_000))
    for step in (0, 400, 600, 1_500, 30_000):
        clock.advance(step)
        await note(log, f"stats+{step}", driver.stats())
        await note(log, f"stats-default+{step}", driver.stats(["default", "nope"]))
    for n in range(9):
        await note(log, f"trace{n}", driver.load_trace(rid(n)))
    await note(log, "list", driver.list_jobs(JobFilter(limit=4)))
    await note(log, "list-dead", driver.list_jobs(JobFilter(states=("dead", "failed"))))
    await note(log, "reclaim", driver.claim("w2", 20, 1_000))


async def operating(driver: Driver, clock: ManualClock, log: Transcript, stage: Stage) -> None:
    now = clock.now_ms()
    await note(
        log,
        "enqueue",
        driver.enqueue(
            [req(now, 0, tenant_id="a"), req(now, 1, tenant_id="a"), req(now, 2, run_at=now + 9)]
        ),
    )
    (running,) = await driver.claim("w", 1, 5_000)
    await note(log, "cancel-running", driver.cancel(rid(0), None, "ops"))
    await note(log, "beat-cancelled", driver.heartbeat(rid(0), running.token, 5_000))
    await note(log, "ack-cancelled", ack(driver, rid(0), running.token))
    await note(log, "cancel-again", driver.cancel(rid(0), None, "ops"))
    await note(log, "cancel-other-tenant", driver.cancel(rid(1), "b", "ops"))
    await note(log, "cancel-delayed", driver.cancel(rid(2), None, None))
    await note(log, "retry-live", driver.retry(rid(1), "a", False, "ops"))
    await note(log, "retry-cancelled", driver.retry(rid(0), "a", False, "ops"))
    await note(log, "retry-cancelled-ok", driver.retry(rid(0), "a", True, "ops"))
    await note(log, "retry-missing", driver.retry("nope", None, True, None))
    await note(log, "get-tenant", driver.get(rid(1), "b"))
    await note(log, "trace-tenant", driver.load_trace(rid(1), "b"))
    await note(log, "enqueue-key-taken", driver.enqueue([req(now, 9, idempotency_key="k2")]))
    await note(log, "retry-key-taken", driver.retry(rid(2), None, True, "ops"))
    await note(
        log,
        "event",
        driver.record_event(
            EventRecord(job_id=None, at=now, kind="note", actor="me", data={"x": [1]})
        ),
    )
    await note(log, "claim", driver.claim("w", 10, 1_000, ["default"]))
    for n in (0, 1, 2, 9):
        await note(log, f"trace{n}", driver.load_trace(rid(n)))


async def stepping(driver: Driver, clock: ManualClock, log: Transcript, stage: Stage) -> None:
    now = clock.now_ms()
    await driver.enqueue([req(now, 0)])
    (c,) = await driver.claim("w", 1, 5_000)
    for name, status, started in (("b", "completed", 5), ("a", "sleeping", 5), ("c", "failed", 1)):
        await note(
            log,
            f"save-{name}",
            save_step(
                driver,
                rid(0),
                c.token,
                StepRecord(
                    job_id=rid(0),
                    run_id=rid(1000),
                    name=name,
                    status=status,
                    output={"v": name},
                    started_at=now + started,
                ),
            ),
        )
    await note(
        log,
        "resave-b",
        save_step(
            driver,
            rid(0),
            c.token,
            StepRecord(
                job_id=rid(0),
                run_id=rid(1000),
                name="b",
                status="completed",
                output=None,
                error="e",
                started_at=now + 5,
                finished_at=now + 7,
                attempts=2,
            ),
        ),
    )
    await note(log, "steps", driver.load_steps(rid(1000)))
    await driver.nack(rid(0), c.token, NackOptions(delay_ms=0, counts_as_attempt=False))
    await note(
        log,
        "save-stale",
        save_step(
            driver,
            rid(0),
            c.token,
            StepRecord(
                job_id=rid(0), run_id=rid(1000), name="d", status="completed", started_at=now
            ),
        ),
    )
    await note(log, "steps-after", driver.load_steps(rid(1000)))


async def sharing(driver: Driver, clock: ManualClock, log: Transcript, stage: Stage) -> None:
    now = clock.now_ms()
    await note(log, "slot-a", driver.acquire_slots("j1", [("q", 2), ("t", 1)], now + 100))
    await note(log, "slot-b", driver.acquire_slots("j2", [("q", 2), ("t", 1)], now + 100))
    await note(log, "slot-c", driver.acquire_slots("j3", [("q", 2)], now + 100))
    await note(log, "slot-d", driver.acquire_slots("j4", [("q", 2)], now + 100))
    await note(log, "slot-again", driver.acquire_slots("j1", [("q", 2), ("t", 1)], now + 200))
    await driver.release_slots("j3")
    await note(log, "slot-freed", driver.acquire_slots("j4", [("q", 2)], now + 100))
    clock.advance(150)
    await note(log, "slot-expired", driver.acquire_slots("j5", [("t", 1), ("q", 3)], now + 300))
    await note(log, "no-caps", driver.acquire_slots("j6", [], now + 300))
    for n, seen_at in enumerate((now, now + 10, now + 20)):
        await driver.worker_seen(
            WorkerInfo(
                id=f"w{n}",
                hostname="h",
                pid=n,
                queues=None if n else ["a"],
                concurrency=4,
                started_at=now,
                last_seen_at=seen_at,
            )
        )
    await driver.worker_seen(
        WorkerInfo(
            id="w0",
            hostname="h2",
            pid=9,
            queues=["b", "c"],
            concurrency=8,
            started_at=now,
            last_seen_at=now + 30,
        )
    )
    await note(log, "workers", driver.live_workers(now + 10))
    await driver.worker_gone("w2")
    await note(log, "workers-after", driver.live_workers(0))
    for n, (name, env, started) in enumerate((("f", "prod", 5), ("f", "dev", 7), ("g", "prod", 5))):
        await driver.backfill_save(
            BackfillRun(
                run_id=f"r{n}",
                name=name,
                checksum="c",
                environment=env,
                status="running",
                app_version=None,
                rows_processed=0,
                started_at=now + started,
            )
        )
    await driver.backfill_save(
        BackfillRun(
            run_id="r0",
            name="f",
            checksum="c2",
            environment="prod",
            status="completed",
            app_version="1.2",
            rows_processed=10,
            rows_total=10,
            cursor={"id": [3, "x"]},
            job_id="j",
            started_at=now + 5,
            finished_at=now + 9,
            error=None,
        )
    )
    await note(log, "backfills", driver.backfill_runs())
    await note(log, "backfills-f", driver.backfill_runs("f"))
    await note(log, "backfills-prod", driver.backfill_runs(None, "prod"))
    await note(log, "lead-a", driver.lead(lease_name("t"), "a", 1_000))
    await note(log, "lead-b", driver.lead(lease_name("t"), "b", 1_000))
    await note(log, "lead-a-renew", driver.lead(lease_name("t"), "a", 1_000))
    clock.advance(1_000)
    await note(log, "lead-b-expired", driver.lead(lease_name("t"), "b", 1_000))
    await note(log, "lead-a-lost", driver.lead(lease_name("t"), "a", 1_000))
    await note(log, "task-none", driver.task_state("t"))
    await note(log, "claim-first", driver.task_claim("t", None, now + 60_000))
    await note(log, "claim-stale", driver.task_claim("t", None, now + 30_000))
    await note(log, "claim-next", driver.task_claim("t", now + 60_000, now + 120_000))
    await note(log, "task", driver.task_state("t"))


def staging(driver: Driver, url: str, app_transaction: AppTransaction) -> Stage:
    async def stage(requests: Sequence[EnqueueRequest]) -> list[str]:
        async with app_transaction(driver, url) as tx:
            return await driver.outbox_stage(tx, requests)

    return stage


@pytest.mark.parametrize("scenario", [walkthrough, settling, operating, stepping, sharing])
async def test_the_driver_answers_every_call_as_the_memory_driver_does(
    database_url: str, app_transaction: AppTransaction, scenario: Scenario
) -> None:
    reference_clock = ManualClock(START)
    reference = MemoryDriver(reference_clock)
    expected: Transcript = []
    await scenario(
        reference,
        reference_clock,
        expected,
        staging(reference, "memory://", builtin_app_transaction),
    )
    clock = ManualClock(START)
    driver = open_driver(database_url, clock=clock)
    actual: Transcript = []
    try:
        await driver.migrate()
        await scenario(driver, clock, actual, staging(driver, database_url, app_transaction))
    finally:
        await driver.close()
    assert [entry[0] for entry in actual] == [entry[0] for entry in expected]
    for mine, reference_entry in zip(actual, expected, strict=True):
        assert mine == reference_entry, mine[0]
