"""A memory driver whose acks wait at a gate: a commit still on its way."""

from __future__ import annotations

from typing import Any

import anyio

from engine import ManualClock
from engine.drivers.memory import MemoryDriver


class SlowAcks(MemoryDriver):
    """Acks wait at `gate`; `waiting` lists the jobs whose ack has started, in order."""

    def __init__(self, clock: ManualClock) -> None:
        super().__init__(clock)
        self.gate = anyio.Event()
        self.waiting: list[str] = []

    async def ack(self, job_id: str, token: str, output: Any = None) -> None:
        self.waiting.append(job_id)
        await self.gate.wait()
        await super().ack(job_id, token, output)
