"""Change signals (engine/changes.py) on Redis: a counter `P chgn` and a channel `P chg`.

Every write script a follower cares about (enqueue, claim, settles, cancel, retry, steps,
progress, events, reruns, prunes, backfills, descriptors, pauses) ends in `changed(p)`: INCR the
counter and PUBLISH its new value, inside the script that already runs, so no round trip is
added. It does so only while some connection is subscribed to the channel (PUBSUB NUMSUB): a
follower's subscription is its lease, so a store nobody follows pays one lookup per write and
writes (and replicates) nothing more. The count is shared by every process on the server.
"""

from __future__ import annotations

from redis.asyncio import Redis
from redis.exceptions import RedisError

from engine.changes import ChangeFeed
from engine.clock import Clock
from engine.drivers.redis.keys import Keys
from engine.drivers.redis.wake import Subscription

# The Lua function each signalling script defines; `p` is the key prefix.
CHANGED_FN = r"""
local function changed(p)
  local ch = p .. 'chg'
  if redis.call('PUBSUB', 'NUMSUB', ch)[2] > 0 then
    redis.call('PUBLISH', ch, redis.call('INCR', p .. 'chgn'))
  end
end
"""


class ChangeListener:
    """One subscription per driver to `P chg`, started by the first `wait_for_change`; each
    message moves a local feed that wakes every waiting reader of this process."""

    def __init__(self, client: Redis, keys: Keys, subscriber: Redis) -> None:
        """`subscriber`: the client whose connection waits for the messages."""
        self._client = client
        self._counter = keys.change_count
        self._feed = ChangeFeed()
        self._subscription = Subscription(subscriber, keys.changes, self._feed.notify)

    async def wait(self, seen: int, clock: Clock, timeout_ms: int) -> int:
        await self._subscription.ready()
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

    async def close(self) -> None:
        await self._subscription.close()
