"""A worker listener that tests (and a driver's conformance run) await: every wait is on an
event and bounded."""

from __future__ import annotations

import anyio

from engine.observe import WorkerEvent


class Recorder:
    def __init__(self) -> None:
        self.events: list[WorkerEvent] = []
        self._changed = anyio.Event()

    def __call__(self, event: WorkerEvent) -> None:
        self.events.append(event)
        self._changed.set()
        self._changed = anyio.Event()

    def kinds(self, job_id: str | None = None) -> list[str]:
        return [e.kind for e in self.events if job_id is None or e.job_id == job_id]

    async def wait(self, kind: str, job_id: str | None = None, *, count: int = 1) -> WorkerEvent:
        """Wait (at most 10 s) until `count` events of `kind` (for `job_id`) have been seen."""
        with anyio.fail_after(10):
            while True:
                matching = [
                    e
                    for e in self.events
                    if e.kind == kind and (job_id is None or e.job_id == job_id)
                ]
                if len(matching) >= count:
                    return matching[count - 1]
                await self._changed.wait()
