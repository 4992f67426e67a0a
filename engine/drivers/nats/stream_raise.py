"""The program `stream_limit.raise_line` runs: set one limit of a bucket's stream on the
servers of a URL, through nats-py (the `nats` CLI is seldom installed where the app runs)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from engine.drivers.nats.connection import connect, parse_nats_url

CONNECT_TIMEOUT_S = 5.0


def main(argv: Sequence[str]) -> None:
    """`raise_line`'s program: URL, stream, limit, value; prints the limit as now set."""
    url, stream, limit, value = argv
    asyncio.run(_raise(url, stream, limit, int(value)))


async def _raise(url: str, stream: str, limit: str, value: int) -> None:
    client = await connect(parse_nats_url(url).servers, CONNECT_TIMEOUT_S, reconnect=False)
    try:
        js = client.jetstream(timeout=CONNECT_TIMEOUT_S)
        config = (await js.stream_info(stream)).config
        setattr(config, limit, value)
        await js.update_stream(config)
        now = getattr((await js.stream_info(stream)).config, limit)
        print(stream, limit, now)
    finally:
        await client.close()
