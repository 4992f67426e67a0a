"""What the worker tests share: a job keyed by a number, and a driver whose acks wait."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

import anyio
from pydantic import BaseModel

from engine import JobContext, JobDefinition, JobRegistry, ManualClock, job
from engine.drivers.base import AckWrite
from engine.drivers.memory import MemoryDriver
from engine.errors import JobsError


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

    async def ack_many(self, writes: Sequence[AckWrite]) -> list[JobsError | None]:
        self.waiting.extend(write.job_id for write in writes)
        await self.gate.wait()
        return await super().ack_many(writes)
