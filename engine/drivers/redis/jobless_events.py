"""Events of no job (the audit of calls that named no job the caller may see), kept in
`P jobless` by their `at`, so the pruner's batch is one range of the set: it costs what it
deletes, however many are kept."""

from __future__ import annotations

import json
from typing import cast

from engine.drivers.redis.store import Store

# Members an earlier build's `P ev:` holds, moved per round trip by `move_from_sequence`.
_MOVE_BATCH = 1_000


async def count(store: Store, before: int) -> int:
    return int(await store.client.zcount(store.keys.jobless_events, "-inf", f"({before}"))


async def forget(store: Store, before: int, limit: int) -> int:
    """An event is never written again, so reading the old ones and removing them in a second
    round trip races with nothing; ZREM answers the ones this call removed."""
    if limit <= 0:
        return 0
    key = store.keys.jobless_events
    members = cast(list[str], await store.client.zrangebyscore(key, "-inf", f"({before}", 0, limit))
    if not members:
        return 0
    return int(await store.client.zrem(key, *members))


async def move_from_sequence(store: Store) -> None:
    """Events of no job an earlier build wrote to `P ev:` (by sequence) join `P jobless` by
    their `at`. One EXISTS when there are none, so it runs at every migrate: a process of the
    earlier build still running writes there until it is upgraded."""
    client = store.client
    old = store.keys.events(None)
    if not await client.exists(old):
        return
    while members := cast(list[str], await client.zrange(old, 0, _MOVE_BATCH - 1)):
        by_at = {m: int(json.loads(m.partition("|")[2])["at"]) for m in members}
        pipe = client.pipeline(transaction=True)
        pipe.zadd(store.keys.jobless_events, by_at)
        pipe.zrem(old, *members)
        await pipe.execute()
