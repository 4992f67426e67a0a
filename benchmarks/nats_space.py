"""A fresh NATS namespace per system and workload: a bucket (and stream) name no other step uses.

mcp-jobs takes its KV bucket from the URL's path; the taskiq system names its stream after the
same path. Every JetStream stream whose name holds that token (`KV_<bucket>` for mcp-jobs,
`<bucket>` for taskiq) is deleted after the step, so the server's store does not grow run after
run. Nothing else on the server is touched.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urlsplit, urlunsplit


class NatsSpaceError(ValueError):
    """`--nats-url` is not a nats:// server address."""


def server_address(url: str) -> str:
    """The server part of a `--nats-url` (`nats://host:port`); any path or query is dropped."""
    parts = urlsplit(url)
    if parts.scheme not in ("nats", "tls") or not parts.netloc:
        raise NatsSpaceError(f"--nats-url {url!r}: expected nats://host:port")
    return urlunsplit((parts.scheme, parts.netloc, "", "", ""))


async def server_settings(url: str) -> dict[str, Any]:
    """What decides what an acknowledged write means here, printed beside the numbers."""
    import nats  # the `nats` extra: imported only when a NATS system runs

    client = await nats.connect(server_address(url))
    try:
        v = client.connected_server_version
        version = f"{v.major}.{v.minor}.{v.patch}"
        account = await client.jetstream().account_info()
    finally:
        await client.close()
    # nats-server syncs file storage to disk on an interval (2 min by default), not per write.
    return {"nats_version": version, "max_storage": account.limits.max_storage}


async def _drop(url: str, token: str) -> None:
    import nats  # the `nats` extra: imported only when a NATS system runs

    client = await nats.connect(server_address(url))
    try:
        js = client.jetstream()
        for name in await js.streams_info():
            if token in (name.config.name or ""):
                await js.delete_stream(name.config.name or "")
    finally:
        await client.close()


@asynccontextmanager
async def fresh_namespace(url: str, label: str) -> AsyncIterator[str]:
    """Yield `nats://host:port/<bucket>` with a bucket name unique to this step; delete every
    stream named after it afterwards."""
    tag = re.sub(r"[^a-z0-9]+", "_", label.lower()).strip("_")[:40]
    token = f"bench_{tag}_{secrets.token_hex(3)}"
    try:
        yield f"{server_address(url)}/{token}"
    finally:
        await _drop(url, token)
