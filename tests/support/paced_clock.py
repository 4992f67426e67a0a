"""A retry clock for tests of held settles: it moves by each pause it is asked to wait."""

from __future__ import annotations

from collections.abc import Awaitable, Callable


class PacedClock:
    """A retry clock that moves by each pause it is asked to wait, and remembers them."""

    def __init__(self, then: tuple[int, Callable[[], Awaitable[None]]] | None = None) -> None:
        """`then`: after that many pauses, run that (a server freed meanwhile)."""
        self.now = 0
        self.pauses: list[int] = []
        self._then = then

    def now_ms(self) -> int:
        return self.now

    async def sleep_ms(self, ms: int) -> None:
        self.pauses.append(ms)
        self.now += ms
        if self._then is not None and len(self.pauses) == self._then[0]:
            await self._then[1]()
