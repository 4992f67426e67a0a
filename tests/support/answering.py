"""A call asked again while its server is away: the server's answer decides, not time."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio

from engine.driver_errors import DriverUnavailableError

T = TypeVar("T")


async def answered(
    call: Callable[[], Awaitable[T]], *, within: float = 30, every: float = 0.05
) -> T:
    """`call`'s answer once its server answers again (a restart, a cluster electing its
    leaders); fails after `within` seconds. `every` only paces the asking."""
    with anyio.fail_after(within):
        while True:
            try:
                return await call()
            except DriverUnavailableError:
                await anyio.sleep(every)
