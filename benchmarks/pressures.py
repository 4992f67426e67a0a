"""The four database pressures of workload 8 (`benchmarks/pressure.py` runs them): each holds
its pressure on `url` for `seconds` and says what it did. The driver's sessions are told apart
from the harness's by application_name."""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg

# What the PostgreSQL driver names its sessions (engine/drivers/postgres/connections.py); the
# harness names its own otherwise, so the terminator never ends them.
DRIVER_APP = "mcp-jobs"
HARNESS_APP = "pressure-harness"


async def harness_conn(url: str, app: str = HARNESS_APP) -> asyncpg.Connection[asyncpg.Record]:
    return await asyncpg.connect(url, server_settings={"application_name": app})


async def idle_tx(url: str, seconds: float, options: argparse.Namespace) -> dict[str, Any]:
    conn = await harness_conn(url)
    try:
        tx = conn.transaction()
        await tx.start()
        xid = await conn.fetchval("SELECT txid_current()")
        await asyncio.sleep(seconds)
        await tx.rollback()
    finally:
        await conn.close()
    return {"xid": int(xid)}


async def rr_readers(url: str, seconds: float, options: argparse.Namespace) -> dict[str, Any]:
    end = time.monotonic() + seconds

    async def reader() -> int:
        scans = 0
        conn = await harness_conn(url)
        try:
            # One snapshot for the whole pressure, as a long report or pg_dump holds one.
            async with conn.transaction(isolation="repeatable_read"):
                while time.monotonic() < end:
                    await conn.fetchrow("SELECT count(*), sum(attempt) FROM mcp_jobs.jobs")
                    scans += 1
        finally:
            await conn.close()
        return scans

    scans = await asyncio.gather(*(reader() for _ in range(options.readers)))
    return {"readers": options.readers, "scans": sum(scans)}


async def terminate(url: str, seconds: float, options: argparse.Namespace) -> dict[str, Any]:
    end = time.monotonic() + seconds
    conn = await harness_conn(url)
    rounds = ended = 0
    try:
        while time.monotonic() < end:
            ended += await conn.fetchval(
                "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity"
                " WHERE datname = current_database() AND application_name = $1",
                DRIVER_APP,
            )
            rounds += 1
            await asyncio.sleep(options.terminate_every_ms / 1000)
    finally:
        await conn.close()
    return {"rounds": rounds, "terminated": ended}


async def idle_connections(url: str, seconds: float, options: argparse.Namespace) -> dict[str, Any]:
    held: list[asyncpg.Connection[asyncpg.Record]] = []
    refused: list[str] = []
    opened_at = time.monotonic()
    try:
        # In groups of 20: 300 at once is a connection storm, a different pressure.
        for lo in range(0, options.idle_connections, 20):
            count = min(20, options.idle_connections - lo)
            got = await asyncio.gather(
                *(harness_conn(url, "pressure-idle") for _ in range(count)),
                return_exceptions=True,
            )
            for conn in got:
                if isinstance(conn, BaseException):
                    refused.append(repr(conn))
                else:
                    held.append(conn)
        open_s = time.monotonic() - opened_at
        await asyncio.sleep(max(0.0, seconds - open_s))
    finally:
        await asyncio.gather(*(c.close() for c in held), return_exceptions=True)
    return {"held": len(held), "refused": len(refused), "open_s": round(open_s, 2)}


PRESSURES: dict[str, Callable[[str, float, argparse.Namespace], Awaitable[dict[str, Any]]]] = {
    "idle_tx": idle_tx,
    "rr_readers": rr_readers,
    "terminate": terminate,
    "idle_connections": idle_connections,
}
