"""The database away as a worker takes a job's cap slots (before its body begins): one WARNING
saying the job was not started and runs again once its lease runs out, not an ERROR "could not
be settled" with a traceback for a job nothing was settling."""

from __future__ import annotations

import logging

import anyio
import pytest
from pydantic import BaseModel

from engine import JobContext, JobRegistry, Jobs, ManualClock, Worker, job
from engine.driver_errors import DriverUnavailableError
from engine.drivers.memory import MemoryDriver


class Item(BaseModel):
    n: int


async def test_an_outage_before_the_body_began_is_one_warning(
    clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    registry = JobRegistry()
    ran: list[int] = []

    @job(idempotency_key=lambda i: str(i.n), concurrency=2, registry=registry)
    async def capped(data: Item, ctx: JobContext) -> None:
        ran.append(data.n)

    driver = MemoryDriver(clock)
    jobs = Jobs(driver, registry=registry, clock=clock)
    await jobs.enqueue(capped, {"n": 1})

    async def away(*args: object, **kwargs: object) -> None:
        raise DriverUnavailableError("memory", "the database is away")

    driver.acquire_slots = away  # type: ignore[method-assign]
    with caplog.at_level(logging.WARNING, logger="mcp_jobs.worker"), anyio.fail_after(10):
        await Worker(jobs).run_until_idle()
    lines = [r for r in caplog.records if r.name == "mcp_jobs.worker"]
    assert [r.levelno for r in lines] == [logging.WARNING], [r.getMessage() for r in lines]
    assert "not started" in lines[0].getMessage() and lines[0].exc_info is None
    assert ran == []
    assert (await jobs.list()).jobs[0].state == "running"  # its lease's to return
