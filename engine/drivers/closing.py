"""A driver that stays closed: after `close()`, every call refuses with DRIVER_CLOSED.

Every built-in driver wears it, so the rule is the same whatever a call reaches: a PostgreSQL
claim for no queue, or a wait for work, touches no connection; a Redis or NATS client reconnects
on its next call, a connection the closed `Jobs` no longer owns. Without it, a worker left
running on a closed `Jobs` went on as if nothing had happened (or, on PostgreSQL, spun).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from engine.driver_errors import DriverClosedError

D = TypeVar("D", bound=type)


def closable(cls: D) -> D:
    """Make `close()` idempotent and final on `cls`: once it ran, each public coroutine method
    (inherited ones too) raises DriverClosedError before it starts."""
    driver: Any = cls  # its methods are replaced by name
    for name in dir(driver):
        # As stored (getattr_static): a static or class method is left as it is.
        method = inspect.getattr_static(driver, name)
        if name.startswith("_") or name == "close" or not inspect.iscoroutinefunction(method):
            continue
        setattr(driver, name, _refusing(method))
    driver.close = _closing(driver.close)
    driver._closed = False
    return cls


def _refusing(method: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    @functools.wraps(method)
    async def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        if self._closed:
            raise DriverClosedError(self.kind)
        return await method(self, *args, **kwargs)

    return call


def _closing(close: Callable[[Any], Awaitable[None]]) -> Callable[[Any], Awaitable[None]]:
    @functools.wraps(close)
    async def call(self: Any) -> None:
        if self._closed:
            return
        self._closed = True  # before the teardown: a call racing it refuses, not reopens
        await close(self)

    return call
