"""What every benchmarked system provides, inside a child process: install, enqueue, work.

A system adapter uses the system's public API with the settings its own documentation
recommends. It never counts or times anything itself; the handlers it registers call the
`Tally`, and `run_worker` returns once the tally is complete and the worker has stopped cleanly.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, ClassVar, Literal

from benchmarks.tally import Tally

Kind = Literal["noop", "steps"]
Backend = Literal["postgres", "sqlite", "redis", "nats"]
STEP_COUNT = 3


class Producer(ABC):
    """An open client that enqueues jobs `{"i": index}` of one kind."""

    @abstractmethod
    async def enqueue_one(self, kind: Kind, i: int) -> None: ...

    @abstractmethod
    async def enqueue_many(self, kind: Kind, indexes: Sequence[int]) -> list[str]:
        """One call, one batch. Returns the ids the system gave the jobs (as strings)."""

    @abstractmethod
    async def close(self) -> None: ...


class System(ABC):
    """One queue under test."""

    # The event loop its own CLI runs workers on.
    loop: ClassVar[Literal["asyncio", "uvloop"]] = "asyncio"

    def __init__(self, backend: Backend = "postgres") -> None:
        self.backend = backend

    @abstractmethod
    def settings(self, concurrency: int) -> dict[str, Any]:
        """The knobs this run uses, recorded beside its numbers."""

    @abstractmethod
    async def install(self, url: str, concurrency: int) -> None:
        """Create the system's schema in the fresh database at `url`."""

    @abstractmethod
    async def producer(self, url: str) -> Producer: ...

    @abstractmethod
    async def run_worker(self, url: str, kind: Kind, concurrency: int, tally: Tally) -> None:
        """Run one worker (`concurrency` jobs at a time) until `tally.complete`, then stop it
        gracefully and return. Call `tally.begin()` right before the worker takes work."""

    @abstractmethod
    async def unfinished(self, url: str, kind: Kind) -> int:
        """Jobs of `kind` not (yet) settled as successful — 0 after a clean drain."""


def payload(i: int) -> dict[str, int]:
    return {"i": i}
