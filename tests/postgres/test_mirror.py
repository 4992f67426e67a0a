"""The PostgreSQL driver mirrors the memory driver call for call.

Each scenario drives the Protocol directly (below the client and the worker) on a MemoryDriver
and on a PostgresDriver, each with its own manual clock started at the same instant, and records
everything observable: records, results, stats, events, error codes. The two transcripts must be
equal. Tokens are random per driver and are left out.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from pydantic import BaseModel

from engine import ManualClock
from engine.drivers.base import Driver
from engine.drivers.memory import MemoryDriver
from engine.errors import JobsError
from schemas.backfill import BackfillRun
from schemas.events import EventRecord
from schemas.jobs import EnqueueRequest, JobFilter, NackOptions
from schemas.stats import WorkerInfo
from schemas.steps import StepRecord
from tests.postgres.conftest import DriverFactory

Transcript = list[Any]
Scenario = Callable[[Driver, ManualClock, Transcript], Awaitable[None]]


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


def seen(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(exclude={"token"})
    if isinstance(value, list | tuple):
        return [seen(v) for v in value]
    return value


async def note(log: Transcript, label: str, call: Awaitable[Any]) -> Any:
    try:
        value = await call
    except JobsError as exc:
        log.append((label, "error", exc.code, exc.details))
        return None
    log.append((label, seen(value)))
    return value


async def settling(driver: Driver, clock: ManualClock, log: Transcript) -> None:
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
            NackOptions(delay_ms=1_000, error="sleeping", counts_as_attempt=False, park=True),
        ),
    )
    await note(
        log, "retry", driver.nack(rid(2), tokens[rid(2)], NackOptions(delay_ms=2_000, error="boom"))
    )
    await note(log, "retry-now", driver.nack(rid(3), tokens[rid(3)], NackOptions(error="now")))
    await note(
        log,
        "dead",
        driver.nack(rid(4), tokens[rid(4)], NackOptions(error="gone", dead_letter=True)),
    )
    await note(log, "fail", driver.nack(rid(5), tokens[rid(5)], NackOptions(fail=True)))
    await note(log, "ack", driver.ack(rid(6), tokens[rid(6)], {"out": [1, 2]}))
    await note(log, "ack-again", driver.ack(rid(6), tokens[rid(6)]))
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


async def operating(driver: Driver, clock: ManualClock, log: Transcript) -> None:
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
    await note(log, "ack-cancelled", driver.ack(rid(0), running.token))
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


async def stepping(driver: Driver, clock: ManualClock, log: Transcript) -> None:
    now = clock.now_ms()
    await driver.enqueue([req(now, 0)])
    (c,) = await driver.claim("w", 1, 5_000)
    for name, status, started in (("b", "completed", 5), ("a", "sleeping", 5), ("c", "failed", 1)):
        await note(
            log,
            f"save-{name}",
            driver.save_step(
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
        driver.save_step(
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
        driver.save_step(
            rid(0),
            c.token,
            StepRecord(
                job_id=rid(0), run_id=rid(1000), name="d", status="completed", started_at=now
            ),
        ),
    )
    await note(log, "steps-after", driver.load_steps(rid(1000)))


async def sharing(driver: Driver, clock: ManualClock, log: Transcript) -> None:
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
    await note(log, "lead-a", driver.scheduler_lead("a", 1_000))
    await note(log, "lead-b", driver.scheduler_lead("b", 1_000))
    await note(log, "lead-a-renew", driver.scheduler_lead("a", 1_000))
    clock.advance(1_000)
    await note(log, "lead-b-expired", driver.scheduler_lead("b", 1_000))
    await note(log, "lead-a-lost", driver.scheduler_lead("a", 1_000))
    await note(log, "task-none", driver.task_state("t"))
    await driver.task_fired("t", now + 60_000)
    await driver.task_fired("t", now + 30_000)
    await note(log, "task", driver.task_state("t"))


@pytest.mark.parametrize("scenario", [settling, operating, stepping, sharing])
async def test_postgres_answers_like_memory(
    make_driver: DriverFactory, clock: ManualClock, scenario: Scenario
) -> None:
    memory_clock = ManualClock(clock.now_ms())
    expected: Transcript = []
    await scenario(MemoryDriver(memory_clock), memory_clock, expected)
    actual: Transcript = []
    await scenario(await make_driver(), clock, actual)
    assert len(actual) == len(expected)
    for mine, reference in zip(actual, expected, strict=True):
        assert mine == reference
