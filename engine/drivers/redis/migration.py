"""`migrate` on Redis. Nothing to create: keys appear on first write. What an earlier build did
not keep is built once: the dead and failed groups (stats.py), the published outbox rows' index,
the name, tenant and queue indexes, the events of no job by time.

A store already at this version, with all of that built, is only read: a server at `maxmemory`
refuses every write, and `connect()` migrates, so otherwise no process could open a full store
to read it, diagnose it or prune it.
"""

from __future__ import annotations

from engine.drivers.redis import jobless_events, outbox, reads
from engine.drivers.redis import stats as stats_store
from engine.drivers.redis.scripts import ALL_SCRIPTS
from engine.drivers.redis.settle_scripts import SETTLE_SCRIPTS
from engine.drivers.redis.store import Store


async def migrate(store: Store, version: str) -> bool:
    """Answers whether this call installed the prefix (wrote its version key)."""
    if await is_current(store, version):
        return False
    client = store.client
    # Loading the scripts checks the server (an ACL without EVALSHA, a Lua it cannot run).
    for script in (*ALL_SCRIPTS, *SETTLE_SCRIPTS):
        await script.load(client)
    fresh = bool(await client.set(store.keys.version, version, nx=True))
    # Dead and failed rows stored before their groups' sets join them now.
    await stats_store.regroup(store)
    await outbox.index_published(store, fresh=fresh)
    await reads.index_names(store, fresh=fresh)
    await jobless_events.move_from_sequence(store)
    return fresh


async def stored_version(store: Store) -> int:
    """The version its key holds (0: none, or not a number another program wrote there)."""
    stored = await store.client.get(store.keys.version)
    text = stored.decode() if isinstance(stored, bytes) else str(stored or "")
    return int(text) if text.isdigit() else 0


async def is_current(store: Store, version: str) -> bool:
    """Whether `migrate` has nothing to do here: read, in two round trips."""
    keys = store.keys
    pipe = store.client.pipeline(transaction=False)
    pipe.get(keys.version)
    pipe.get(keys.by_index_built)
    pipe.exists(keys.obpub_built)
    pipe.exists(keys.events(None))  # where an earlier build wrote the events of no job
    stored, indexed, published, old_events = await pipe.execute()
    if stored != version or indexed != reads.INDEX_VERSION or not published or old_events:
        return False
    return not await stats_store.regroup_due(store)


__all__ = ["is_current", "migrate", "stored_version"]
