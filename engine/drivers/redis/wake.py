"""Wake-ups across processes: SUBSCRIBE to the prefix's `wake` channel, polling when that fails.

An enqueue script PUBLISHes on the channel within its atomic step; one listener task per driver
turns each message into an in-process wake-up. It never raises: while the server is away the
listener is down, idle workers fall back to their poll interval (the wait's timeout), and the
listener subscribes again.
"""

from __future__ import annotations

import asyncio
import contextlib

from redis.asyncio import Redis
from redis.exceptions import RedisError

from engine.clock import Clock
from engine.wake import Waker

# Real time on purpose: how often to knock on a server that is down is network pacing, not job
# time, and a manual test clock that never moves must not stop a resubscribe.
_RETRY_SUBSCRIBE_S = 1.0


class WakeListener:
    def __init__(self, client: Redis, channel: str) -> None:
        self._client = client
        self._channel = channel
        self._waker = Waker()
        self._task: asyncio.Task[None] | None = None
        self._subscribed = asyncio.Event()

    def notify(self) -> None:
        self._waker.notify()

    async def wait(self, clock: Clock, timeout_ms: int) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._listen())
            # Bounded: a server that does not answer leaves the wait to its poll.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(1.0):
                    await self._subscribed.wait()
        await self._waker.wait(clock, timeout_ms)

    async def _listen(self) -> None:
        while True:
            try:
                async with self._client.pubsub(ignore_subscribe_messages=True) as pubsub:
                    await pubsub.subscribe(self._channel)
                    if self._subscribed.is_set():
                        # Back after an outage: what was published meanwhile is missed.
                        self._waker.notify()
                    self._subscribed.set()
                    async for _ in pubsub.listen():
                        self._waker.notify()
            except (RedisError, OSError):
                await asyncio.sleep(_RETRY_SUBSCRIBE_S)

    async def close(self) -> None:
        self._waker.notify()
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, RedisError, OSError):
                await task
