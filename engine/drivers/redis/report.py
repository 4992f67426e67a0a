"""`mcp-jobs db report` on Redis: the fix of an unreachable server and of one out of memory. It
reads what redis-cli's `ping` and `info` would show, through redis-py, so it runs wherever this
package is installed (redis-cli seldom is where the application runs).
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from engine.clock import offset_line
from engine.drivers.base import StoreReport
from engine.drivers.redis import keeping, server_time
from engine.drivers.redis.connection import (
    CLUSTER_REFUSED,
    PASSWORD_ASKED,
    UNAVAILABLE,
    plain,
    split_prefix,
    url_refused,
)
from engine.drivers.redis.keys import FIXED_KEY_TYPES
from engine.drivers.redis.memory import Memory, prune_line
from engine.drivers.urls import migrate_fix, url_word


async def report(url: str, prefix: str, timeout_s: float, schema_version: str) -> StoreReport:
    """What `ServerReport.server_report` answers for the Redis driver."""
    server_url = split_prefix(url)[0]
    # Not the driver's client: one try, no retries through a server that does not answer.
    client: Redis = Redis.from_url(
        server_url,
        decode_responses=True,
        socket_connect_timeout=timeout_s,
        socket_timeout=timeout_s,
        retry=Retry(NoBackoff(), 0),
    )
    try:
        info = await client.info("everything")
        save_points = await keeping.save_points(client)
        wrong = await _wrong_types(client, prefix)
        stored = None if prefix + "version" in wrong else await client.get(prefix + "version")
        stored = stored.decode() if isinstance(stored, bytes) else stored
        keys = await client.dbsize()
        unversioned = stored is None and await _any_key(client, prefix)
        clock = await offset_line(lambda: server_time.read_ms(client))
    except (*UNAVAILABLE, RedisError) as exc:
        return StoreReport(False, _unreachable(server_url, exc, url))
    finally:
        await client.aclose()
    lines = _lines(url, info, save_points, prefix, stored, keys, schema_version)
    if unversioned:
        lines = [
            _reset_line(prefix, url) if line.startswith(named(prefix)) else line for line in lines
        ]
    lines.insert(1, clock)
    if wrong:
        # Not "no jobs stored yet" when the version key itself was overwritten.
        lines = [line for line in lines if not line.startswith(named(prefix))]
    return StoreReport(True, lines + _wrong_type_lines(prefix, wrong))


async def _wrong_types(client: Redis, prefix: str) -> dict[str, tuple[str, str]]:
    """The driver's fixed keys that hold another type than it keeps there: key -> (found,
    kept). Every command of ours on one fails WRONGTYPE (STORE_DAMAGED)."""
    pipe = client.pipeline(transaction=False)
    for name in FIXED_KEY_TYPES:
        pipe.type(prefix + name)
    found = await pipe.execute()
    return {
        prefix + name: (kind, kept)
        for (name, kept), kind in zip(FIXED_KEY_TYPES.items(), found, strict=True)
        if kind not in ("none", kept)
    }


async def _any_key(client: Redis, prefix: str) -> bool:
    """Whether any key lies under `prefix` (a scan that stops at the first)."""
    async for _ in client.scan_iter(match=f"{prefix}*", count=1000):
        return True
    return False


def _reset_line(prefix: str, url: str) -> str:
    """Keys under a prefix with no version key: the store was emptied under a process that
    wrote on (an app's client enqueueing, or a worker before its next beat installs it again)."""
    return (
        f"{named(prefix)}: keys stored but no version key: the store appears to have been reset "
        "(a server restarted without persistence, or FLUSHDB) and written to since; the jobs "
        f"stored before are lost. Install it again: {migrate_fix(url)}"
    )


def named(prefix: str) -> str:
    """The prefix as a line names it: quoted, as it ends in its own separator (`mcp-jobs:`)."""
    return f"prefix {json.dumps(prefix, ensure_ascii=False)}"


def _wrong_type_lines(prefix: str, wrong: dict[str, tuple[str, str]]) -> list[str]:
    lines = [
        f"key {key}: a {found}, where the driver keeps a {kept}"
        for key, (found, kept) in wrong.items()
    ]
    if lines:
        lines.append(
            f"{named(prefix)}: another program writes under it; give the jobs a prefix "
            "(?prefix=) or a database number of their own (what an overwritten key held is lost)"
        )
    return lines


def _unreachable(url: str, exc: BaseException, given: str | None = None) -> list[str]:
    """`url`: the server's, without this package's options; `given`: as the driver was given
    it (else `url`), for a refusal that writes the URL to use."""
    parts = urlsplit(url)
    where = f"{parts.hostname or 'localhost'}:{parts.port or 6379}"
    failure = f"{type(exc).__name__}: {plain(exc)}"
    refused = url_refused(exc, given or url)
    if refused is not None:
        # A cluster's refusal, or a password left out, already says what to change.
        advice = (
            ""
            if refused.startswith((CLUSTER_REFUSED, PASSWORD_ASKED))
            else ": correct the URL, or the server's ACL or settings"
        )
        return [f"server: {where} answered and refused ({failure})", refused + advice]
    if isinstance(exc, RedisTimeoutError):
        # Connected, or connecting, and no reply: a second server on the port would not start.
        return [
            f"server: {where} did not answer in time ({failure})",
            "the server is up but not answering: stopped (SIGSTOP), blocked by a long command or "
            f"script, or overloaded; check redis-cli -u {url_word(url)} ping and its log",
        ]
    if isinstance(exc, UNAVAILABLE):
        return [
            f"server: no answer from {where} ({failure})",
            f"start Redis at {where}, or point the URL at where it runs",
        ]
    return [
        f"server: {where} answered and refused ({failure})",
        "the server is loading its data, or refuses what the URL asks (its user's ACL?)",
    ]


def _lines(
    url: str,
    info: dict[str, Any],
    save_points: str | None,
    prefix: str,
    stored: str | None,
    keys: int,
    schema: str,
) -> list[str]:
    memory = Memory.of(info)
    kept = keeping.Keeping.of(info, info, save_points)
    limit = f"of maxmemory {memory.limit_human}" if memory.limit else "(no maxmemory)"
    lines = [
        f"server: Redis {info.get('redis_version')} on port {info.get('tcp_port')}, "
        f"role {info.get('role')}"
        + (" (read-only: point the URL at the primary)" if info.get("role") == "slave" else ""),
        f"memory: {memory.used_human} used {limit}, peak {info.get('used_memory_peak_human')}",
    ]
    if memory.full:
        lines.append(
            "memory full: at or near maxmemory, where the server refuses writes (STORAGE_FULL). "
            "Raise "
            f"maxmemory to {memory.bigger()} (and in the server's configuration file, or a "
            f"restart undoes it): {memory.raise_line(url)}; or free memory: {prune_line(url)}"
        )
    lines += [
        keeping.policy_line(kept.policy or "?"),
        kept.persistence_line(),
        f"clients: {info.get('connected_clients')} connected of maxclients "
        f"{info.get('maxclients', '?')}, {info.get('blocked_clients', 0)} blocked",
    ]
    if stored is None:
        lines.append(f"{named(prefix)}: no jobs stored yet (run {migrate_fix(url)})")
    elif stored != schema:
        lines.append(f"{named(prefix)}: stored by version {stored}, this package's {schema}")
    else:
        lines.append(f"{named(prefix)}: version {stored}, this package's")
    lines.append(f"keys in this database: {keys:,}")
    return lines


__all__ = ["report"]
