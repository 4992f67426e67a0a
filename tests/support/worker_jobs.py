"""What the worker tests share: a job keyed by a number, and a driver whose acks wait."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from pydantic import BaseModel

from engine import JobContext, JobDefinition, JobRegistry, ManualClock, job
from engine.drivers.memory import MemoryDriver


class Item(BaseModel):
    n: int


def keyed_job(
    registry: JobRegistry, body: Callable[[Item], Awaitable[None]] | None = None
) -> JobDefinition[Item]:
    """The job `work`, keyed by its item's number, running `body` (nothing when omitted)."""

    @job(name="work", idempotency_key=lambda i: str(i.n), registry=registry)
    async def work(input: Item, ctx: JobContext) -> None:
        if body is not None:
            await body(input)

    return work


def recording_job(registry: JobRegistry) -> tuple[JobDefinition[Item], list[int]]:
    """The job `work`, and the list its bodies append their item's number to as they start."""
    started: list[int] = []

    async def body(item: Item) -> None:
        started.append(item.n)

    return keyed_job(registry, body), started


class SlowAcks(MemoryDriver):
    """Acks wait at `gate`: a commit still on its way. `waiting` lists the jobs whose ack has
    started, in order."""

    def __init__(self, clock: ManualClock) -> None:
        super().__init__(clock)
        self.gate = anyio.Event()
        self.waiting: list[str] = []

    async def ack(self, job_id: str, token: str, output: Any = None) -> None:
        self.waiting.append(job_id)
        await self.gate.wait()
        await super().ack(job_id, token, output)
