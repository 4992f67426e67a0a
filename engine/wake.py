"""In-process wake-ups: an enqueue nudges idle workers sharing this process."""

from __future__ import annotations

import anyio

from engine.clock import Clock


class Waker:
    def __init__(self) -> None:
        self._event = anyio.Event()

    def notify(self) -> None:
        self._event.set()
        self._event = anyio.Event()

    async def wait(self, clock: Clock, timeout_ms: int) -> None:
        """Return on the next `notify()` or after `timeout_ms` of clock time, whichever is first."""
        event = self._event
        async with anyio.create_task_group() as tg:

            async def _timer() -> None:
                await clock.sleep_ms(timeout_ms)
                tg.cancel_scope.cancel()

            tg.start_soon(_timer)
            await event.wait()
            tg.cancel_scope.cancel()
