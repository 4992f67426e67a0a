"""A command that reads or acts on stored jobs installs no store, as it creates no SQLite file
(cli/database_file.py): `jobs ls` with `?schema=mcp_job` for `mcp_jobs` installed a whole empty
schema and said "no jobs", as a misspelt Redis `?prefix=` or NATS bucket did. Refused, with the
command on the installed one it plainly stands for, else the `db migrate` that installs it."""

from __future__ import annotations

import difflib
from collections.abc import Awaitable, Callable

import anyio
import asyncpg

from engine.drivers.postgres import DEFAULT_SCHEMA
from engine.drivers.postgres.schema_version import installed_schemas
from engine.drivers.urls import SCHEMA_PARAM, naming, split_schema
from engine.errors import DatabaseUrlInvalidError

# How alike an installed schema's name must be to the one asked for to be the one meant.
_ALIKE = 0.75
# The installed stores a refusal names, at most; the Redis version keys looked at, at most.
_SHOWN = 10
_SCANNED = 1000
# A check, not the command's own connection: one that does not answer soon is left to connect().
_CONNECT_SECONDS = 10


class NoSchemaError(DatabaseUrlInvalidError):
    """DATABASE_URL_INVALID for a URL whose store (a PostgreSQL schema, a Redis prefix, a NATS
    bucket: `what`) is not installed, from a command that only acts on what is stored.
    `near_url`: the URL of the installed one it plainly meant (cli/mend.py writes the command on
    it), else None: the fix installs this one."""

    def __init__(
        self,
        url: str,
        what: str,
        name: str,
        installed: list[str],
        near_url: str | None,
        near: str | None,
    ) -> None:
        self.near_url = near_url
        shown = ", ".join(installed[:_SHOWN]) + (", …" if len(installed) > _SHOWN else "")
        there = f"installed here: {shown}" if installed else "none is installed here"
        meant = f" (meant {near}?)" if near is not None else ""
        super().__init__(
            url,
            reason=f"no mcp-jobs {what} {name} on this server ({there}){meant}, and a "
            "command that reads or acts on stored jobs installs none (db migrate, a worker or "
            "serve does)",
            fix="mcp-jobs db migrate",  # written with the URL (FixContext)
            answered=True,  # the URL is well formed: the schema may yet be installed
        )


async def require_installed(url: str) -> None:
    """Raise `NoSchemaError` when `url`'s store is not installed (a PostgreSQL schema, a Redis
    prefix, a NATS bucket); any other URL, or a server that does not answer this check
    (connect() says why), passes."""
    scheme = url.partition("://")[0].lower()
    read = _READERS.get(scheme)
    if read is None:
        return
    try:
        with anyio.fail_after(_CONNECT_SECONDS):
            found = await read(url)
    except Exception:  # refused, away, a bad password: the command's own connect() says so
        return
    if found is None:
        return
    what, name, installed, renamed = found
    if name in installed:
        return
    near = difflib.get_close_matches(name, installed, n=1, cutoff=_ALIKE)
    meant = near[0] if near else None
    raise NoSchemaError(url, what, name, installed, renamed(meant) if meant else None, meant)


Found = tuple[str, str, list[str], Callable[[str], str]]


async def _postgres(url: str) -> Found:
    dsn, named = split_schema(url)
    conn = await asyncpg.connect(dsn, timeout=_CONNECT_SECONDS)
    try:
        installed = await installed_schemas(conn)
    finally:
        await conn.close()
    return "schema", named or DEFAULT_SCHEMA, installed, lambda s: naming(url, SCHEMA_PARAM, s)


async def _redis(url: str) -> Found:
    # The redis extra: imported only where a Redis URL is given.
    from redis.asyncio import Redis

    from engine.drivers.redis.connection import PREFIX_PARAM, split_prefix
    from engine.drivers.redis.keys import DEFAULT_PREFIX

    plain, named = split_prefix(url)
    client = Redis.from_url(plain, socket_connect_timeout=_CONNECT_SECONDS)
    try:
        # Every store's version key ends its prefix (`<prefix>version`): a bounded look.
        found: list[str] = []
        async for key in client.scan_iter(match="*version", count=1000):
            found.append(key.decode() if isinstance(key, bytes) else str(key))
            if len(found) >= _SCANNED:
                break
    finally:
        await client.aclose()
    installed = sorted(k.removesuffix("version") for k in found)
    prefix = named or DEFAULT_PREFIX
    return "prefix", prefix, installed, lambda p: naming(url, PREFIX_PARAM, p)


async def _nats(url: str) -> Found:
    # The nats extra: imported only where a NATS URL is given.
    import nats

    from engine.drivers.nats.connection import parse_nats_url

    parsed = parse_nats_url(url)
    client = await nats.connect(
        parsed.servers, connect_timeout=_CONNECT_SECONDS, allow_reconnect=False
    )
    try:
        names = [info.config.name or "" for info in await client.jetstream().streams_info()]
    finally:
        await client.close()
    installed = sorted(n.removeprefix("KV_") for n in names if n.startswith("KV_"))
    return "bucket", parsed.bucket, installed, lambda b: _with_bucket(url, b)


def _with_bucket(url: str, bucket: str) -> str:
    head, sep, query = url.partition("?")
    scheme, _, rest = head.partition("://")
    return f"{scheme}://{rest.partition('/')[0]}/{bucket}{sep}{query}"


_READERS: dict[str, Callable[[str], Awaitable[Found]]] = {
    "postgres": _postgres,
    "postgresql": _postgres,
    "redis": _redis,
    "rediss": _redis,
    "nats": _nats,
    "tls": _nats,
}
