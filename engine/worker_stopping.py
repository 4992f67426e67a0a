"""What `Worker.stop()` returns (engine.worker): a stop begun, to await or not."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from typing import Any


class Stopping:
    """What `Worker.stop()` returns: the stop has begun; awaiting this waits for the drain to end
    (and raises what crashed a worker started with `start()`). Not awaiting it is fine too."""

    def __init__(self, stopped: Callable[[], Awaitable[None]]) -> None:
        self._stopped = stopped

    def __await__(self) -> Generator[Any, None, None]:
        return self._stopped().__await__()
