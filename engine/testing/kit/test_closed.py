"""A closed driver stays closed: after `close()` every call refuses with DRIVER_CLOSED, which is
not retryable, and nothing reopens a connection behind the caller. A worker left running on a
`Jobs` closed under it stops with that refusal instead of claiming again every poll."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from engine import JobContext, JobRegistry, Jobs, Worker, job
from engine.driver_errors import DriverClosedError
from engine.drivers.base import AckWrite
from engine.testing.blocked import wait_all_tasks_blocked
from schemas.jobs import NackOptions


class Item(BaseModel):
    n: int


async def test_every_call_after_close_refuses_for_good(jobs: Jobs, registry: JobRegistry) -> None:
    @job(idempotency_key=lambda i: str(i.n), registry=registry)
    async def noted(input: Item, ctx: JobContext) -> None:
        return None

    enqueued = await jobs.enqueue(noted, {"n": 1})
    (claimed,) = await jobs.driver.claim("kit-worker", 1, 30_000)
    await jobs.close()
    await jobs.close()  # a second close is a no-op
    driver = jobs.driver
    calls: dict[str, Callable[[], Awaitable[Any]]] = {
        "get": lambda: jobs.get(enqueued.id),
        "list": lambda: jobs.list(),
        "stats": lambda: jobs.stats(),
        "enqueue": lambda: jobs.enqueue(noted, {"n": 2}),
        "claim": lambda: driver.claim("kit-worker", 1, 30_000),
        "heartbeat": lambda: driver.heartbeat(enqueued.id, claimed.token, 30_000),
        "ack_many": lambda: driver.ack_many([AckWrite(enqueued.id, claimed.token, None)]),
        "nack": lambda: driver.nack(enqueued.id, claimed.token, NackOptions(delay_ms=1000)),
        "migrate": lambda: driver.migrate(),
    }
    for name, call in calls.items():
        with pytest.raises(DriverClosedError) as raised:
            await call()
        refusal = raised.value
        assert (refusal.code, refusal.retryable) == ("DRIVER_CLOSED", False), name
        assert "closed" in refusal.cause and "connect(" in refusal.fix, name


async def test_a_worker_on_a_jobs_closed_under_it_stops_with_the_refusal(
    jobs: Jobs, registry: JobRegistry
) -> None:
    worker = Worker(jobs, concurrency=2, scheduler=False, outbox_relay=False)
    with anyio.fail_after(30):
        run = asyncio.create_task(worker.run())
        await wait_all_tasks_blocked()  # idle, waiting for work
        await jobs.close()
        with pytest.raises(DriverClosedError):
            await run
