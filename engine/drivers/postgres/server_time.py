"""The server's clock, read for `ServerClock` (engine/clock.py): at a migrate, at each worker's
beat, and before a claim or a write when none was read for a minute (`ServerClock.agree`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.clock import ServerClock

if TYPE_CHECKING:
    from engine.drivers.postgres.connections import Connections
    from engine.drivers.postgres.schema_version import Conn

# clock_timestamp(), not now(): now() is the transaction's start.
_NOW_MS = "SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint"


async def read_ms(conn: Conn) -> int:
    """The server's clock now, epoch ms."""
    return int(await conn.fetchval(_NOW_MS))


async def measure(db: Connections, clock: ServerClock) -> None:
    async def once(conn: Conn) -> None:
        await clock.measure(lambda: read_ms(conn))

    await db.idempotent(once)
