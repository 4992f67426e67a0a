"""Change signals (engine/changes.py) on Redis: a counter `P chgn` and a channel `P chg`.

Every write script a follower cares about (enqueue, claim, settles, cancel, retry, steps,
progress, events, reruns, prunes, backfills, descriptors, pauses) ends in `changed(p)`: INCR the
counter and PUBLISH its new value, inside the script that already runs, so no round trip is
added. It does so only while some connection is subscribed to the channel (PUBSUB NUMSUB): a
follower's subscription is its lease, so a store nobody follows pays one lookup per write and
writes (and replicates) nothing more. The count is shared by every process on the server.
"""

from __future__ import annotations

import asyncio
import contextlib

from redis.asyncio import Redis
from redis.exceptions import RedisError

from engine.changes import ChangeFeed
from engine.clock import Clock
from engine.drivers.redis.keys import Keys

# The Lua function each signalling script defines; `p` is the key prefix.
CHANGED_FN = r"""
local function changed(p)
  local ch = p .. 'chg'
  if redis.call('PUBSUB', 'NUMSUB', ch)[2] > 0 then
    redis.call('PUBLISH', ch, redis.call('INCR', p .. 'chgn'))
  end
end
"""

# Real time on purpose, as wake.py: resubscribing to a server that is down is network pacing.
_RETRY_SUBSCRIBE_S = 1.0


class ChangeListener:
    """One subscription per driver to `P chg`, started by the first `wait_for_change`; each
    message moves a local feed that wakes every waiting reader of this process."""

    def __init__(self, client: Redis, keys: Keys) -> None:
        self._client = client
        self._channel = keys.changes
        self._counter = keys.change_count
        self._feed = ChangeFeed()
        self._task: asyncio.Task[None] | None = None
        self._subscribed = asyncio.Event()

    async def wait(self, seen: int, clock: Clock, timeout_ms: int) -> int:
        if self._task is None:
            self._task = asyncio.create_task(self._listen())
        if not self._subscribed.is_set():
            # Bounded: a server that does not answer leaves the wait to its timeout.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(1.0):
                    await self._subscribed.wait()
        # Marked before the read: a write published after it moves the feed, so none is lost
        # between the read and the wait.
        mark = self._feed.count
        count = await self._count(seen)
        if count != seen:
            return count
        await self._feed.wait(mark, clock, timeout_ms)
        return await self._count(seen)

    async def _count(self, fallback: int) -> int:
        try:
            raw = await self._client.get(self._counter)
        except (RedisError, OSError):
            return fallback  # the server is away: the reader's next wait or re-read tells
        return int(raw or 0)

    async def _listen(self) -> None:
        while True:
            try:
                async with self._client.pubsub(ignore_subscribe_messages=True) as pubsub:
                    await pubsub.subscribe(self._channel)
                    if self._subscribed.is_set():
                        # Back after an outage: what changed meanwhile went unsignalled.
                        self._feed.notify()
                    self._subscribed.set()
                    async for _ in pubsub.listen():
                        self._feed.notify()
            except (RedisError, OSError):
                await asyncio.sleep(_RETRY_SUBSCRIBE_S)

    async def close(self) -> None:
        self._feed.notify()
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, RedisError, OSError):
                await task
