"""Whether a Redis prefix holds a store (its version key), and which prefixes do."""

from __future__ import annotations

from redis.asyncio import Redis

from engine.drivers.installed import StoreAbsent
from engine.drivers.redis.connection import PREFIX_PARAM
from engine.drivers.redis.keys import Keys
from engine.drivers.urls import naming

# The version keys looked at, at most: a bounded scan, on the refusal's path only.
_SCANNED = 1000


async def prefix_absent(client: Redis, keys: Keys, url: str) -> StoreAbsent | None:
    if await client.exists(keys.version):
        return None
    # Every store's version key ends its prefix (`<prefix>version`).
    found: list[str] = []
    async for key in client.scan_iter(match="*version", count=1000):
        found.append(key.decode() if isinstance(key, bytes) else str(key))
        if len(found) >= _SCANNED:
            break
    installed = sorted(k.removesuffix("version") for k in found)
    return StoreAbsent("prefix", keys.prefix, installed, lambda p: naming(url, PREFIX_PARAM, p))
