"""The Redis server's clock (`TIME`), for `ServerClock` (engine/clock.py) and `db report`."""

from __future__ import annotations

from typing import Any


async def read_ms(client: Any) -> int:
    """The server's clock now, epoch ms. `client`: a redis.asyncio client."""
    seconds, micros = await client.time()
    return int(seconds) * 1000 + int(micros) // 1000
