"""A fresh Redis key space per system and workload: one dedicated database, flushed.

arq writes fixed key names (`arq:queue`, `arq:job:…`) that no prefix can move, so a prefix alone
cannot give two runs separate key spaces: the benchmark takes a whole database of its own and
empties it (`FLUSHDB`, that database only) before and after every step. Database 0 is refused,
and so is a URL that names no database: other clients of a shared server live there.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import redis.asyncio as redis

# Server settings worth printing beside the numbers (durability decides what an ack means).
SETTINGS = ("appendonly", "appendfsync", "save", "maxmemory-policy")


class RedisSpaceError(ValueError):
    """`--redis-url` names no database the benchmark may flush."""


def database_number(url: str) -> int:
    """The database the URL names (`redis://host:port/15` → 15); refuse 0 or none."""
    parts = urlsplit(url)
    if parts.scheme not in ("redis", "rediss"):
        raise RedisSpaceError(f"--redis-url {url!r}: expected redis:// or rediss://")
    path = parts.path.strip("/")
    if not path.isdigit() or int(path) == 0:
        raise RedisSpaceError(
            f"--redis-url {url!r}: name a database other than 0 (e.g. redis://127.0.0.1:6379/15);"
            " the benchmark empties it (FLUSHDB) before and after every step"
        )
    return int(path)


def _bare(url: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(query="", fragment=""))


async def server_settings(url: str) -> dict[str, Any]:
    client = redis.Redis.from_url(_bare(url), decode_responses=True)
    try:
        info = await client.info("server")
        out: dict[str, Any] = {"redis_version": info.get("redis_version")}
        for name in SETTINGS:
            for setting, value in (await client.config_get(name)).items():
                out[str(setting)] = value
    finally:
        await client.aclose()
    out["database"] = database_number(url)
    return out


async def _flush(url: str) -> None:
    client = redis.Redis.from_url(_bare(url))
    try:
        await client.flushdb()
    finally:
        await client.aclose()


@asynccontextmanager
async def fresh_keyspace(url: str, label: str) -> AsyncIterator[str]:
    """Yield `url` with a unique `?prefix=` (mcp-jobs' keys) on an emptied database; empty it
    again afterwards."""
    database_number(url)
    tag = re.sub(r"[^a-z0-9]+", "_", label.lower()).strip("_")[:40]
    prefix = f"bench_{tag}_{secrets.token_hex(3)}:"
    await _flush(url)
    try:
        yield f"{_bare(url)}?prefix={prefix}"
    finally:
        await _flush(url)
