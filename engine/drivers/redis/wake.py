"""Wake-ups across processes: SUBSCRIBE to the prefix's `wake` channel, polling when that fails.

An enqueue script PUBLISHes on the channel within its atomic step; one listener task per driver
turns each message into an in-process wake-up. It never raises: while the server is away the
listener is down, idle workers fall back to their poll interval (the wait's timeout), and the
listener subscribes again.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from redis.asyncio import Redis
from redis.exceptions import RedisError

from engine.clock import Clock
from engine.wake import Waker

# Real time on purpose: how often to knock on a server that is down is network pacing, not job
# time, and a manual test clock that never moves must not stop a resubscribe.
_RETRY_SUBSCRIBE_S = 1.0


class Subscription:
    """One SUBSCRIBE per driver to `channel`, started by the first `ready()`, calling `notify`
    on every message (and once when it subscribes again after an outage, since what was
    published meanwhile is missed). It never raises: it resubscribes while the server is away."""

    def __init__(self, client: Redis, channel: str, notify: Callable[[], None]) -> None:
        self._client = client
        self._channel = channel
        self._notify = notify
        self._task: asyncio.Task[None] | None = None
        self._subscribed = asyncio.Event()

    async def ready(self) -> None:
        """Start listening if not yet, and wait (at most 1 s) until subscribed."""
        if self._task is None:
            self._task = asyncio.create_task(self._listen())
        if not self._subscribed.is_set():
            # Bounded: a server that does not answer leaves the caller to its timeout.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(1.0):
                    await self._subscribed.wait()

    async def _listen(self) -> None:
        while True:
            try:
                async with self._client.pubsub(ignore_subscribe_messages=True) as pubsub:
                    await pubsub.subscribe(self._channel)
                    if self._subscribed.is_set():
                        self._notify()  # back after an outage
                    self._subscribed.set()
                    async for _ in pubsub.listen():
                        self._notify()
            except (RedisError, OSError):
                await asyncio.sleep(_RETRY_SUBSCRIBE_S)

    async def close(self) -> None:
        self._notify()
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, RedisError, OSError):
                await task


class WakeListener:
    def __init__(self, client: Redis, channel: str) -> None:
        self._waker = Waker()
        self._subscription = Subscription(client, channel, self._waker.notify)

    def notify(self) -> None:
        self._waker.notify()

    async def wait(self, clock: Clock, timeout_ms: int) -> None:
        await self._subscription.ready()
        await self._waker.wait(clock, timeout_ms)

    async def close(self) -> None:
        await self._subscription.close()
