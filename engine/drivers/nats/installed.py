"""Whether a NATS server holds the driver's bucket, and which buckets it holds. A connection of
its own: the driver's binds (so creates) its bucket as it opens."""

from __future__ import annotations

from engine.drivers.installed import StoreAbsent
from engine.drivers.nats.connection import NatsUrl, connect


async def bucket_absent(parsed: NatsUrl, url: str, timeout_s: float) -> StoreAbsent | None:
    client = await connect(parsed.servers, timeout_s, reconnect=False)
    try:
        names = [info.config.name or "" for info in await client.jetstream().streams_info()]
    finally:
        await client.close()
    installed = sorted(n.removeprefix("KV_") for n in names if n.startswith("KV_"))
    if parsed.bucket in installed:
        return None
    return StoreAbsent("bucket", parsed.bucket, installed, lambda b: _with_bucket(url, b))


def _with_bucket(url: str, bucket: str) -> str:
    head, sep, query = url.partition("?")
    scheme, _, rest = head.partition("://")
    return f"{scheme}://{rest.partition('/')[0]}/{bucket}{sep}{query}"
