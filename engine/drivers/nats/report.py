"""What an operator runs from a NATS fix line, with only the project installed (the `nats` CLI
is seldom there, and the server's monitoring port is off by default):

    mcp-jobs db nats-report --database-url URL         what takes the JetStream store's room
    mcp-jobs db nats-report --database-url URL KEY     a key as stored now, and its writers' pace

The first is STORAGE_FULL's fix, the second a contended key's. Both only read.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import nats
import nats.js.errors
from nats.js import JetStreamContext
from nats.js.api import AccountInfo, StreamInfo

from engine.clock import offset_line
from engine.drivers.base import StoreReport
from engine.drivers.nats import server_time
from engine.drivers.nats.connection import (
    AUTHORIZATION_REFUSED,
    UNAVAILABLE,
    Fixes,
    NatsUrl,
    authorization_refused,
    connect,
    guard,
    parse_nats_url,
    shown_server,
)
from engine.drivers.nats.stream_limit import full_lines

CONNECT_TIMEOUT_S = 5.0
# How long the key is watched for writes: long enough to see a hot key move, short to wait.
WATCH_S = 1.0
VALUE_SHOWN = 300


def _limit(value: int | None) -> str:
    return "none" if value is None or value < 0 else f"{value:,}"


def storage_lines(account: AccountInfo, streams: Sequence[StreamInfo]) -> list[str]:
    """The account's use against its limits, then every stream's, largest first."""
    limits = account.limits
    lines = [
        f"account: file storage {account.storage:,} bytes used (account limit "
        f"{_limit(limits.max_storage)}), memory {account.memory:,} bytes used (account limit "
        f"{_limit(limits.max_memory)})",
        "a server-wide limit is max_file_store / max_mem_store in the server's jetstream config",
    ]
    for info in sorted(streams, key=lambda s: s.state.bytes, reverse=True):
        config = info.config
        # nats-py hands the policy back as the server's word, not its enum.
        discard = str(getattr(config.discard, "value", config.discard) or "old")
        lines.append(
            f"stream {config.name}: {info.state.bytes:,} bytes, {info.state.messages:,} messages "
            f"(max_bytes {_limit(config.max_bytes)}, max_msgs {_limit(config.max_msgs)}, "
            f"discard {discard})"
        )
    return lines


async def _key_lines(js: JetStreamContext, parsed: NatsUrl, key: str) -> list[str]:
    try:
        kv = await js.key_value(parsed.bucket)
    except nats.js.errors.BucketNotFoundError:
        return [f"no bucket {parsed.bucket} on the server"]
    try:
        entry = await kv.get(key)
        value = (entry.value or b"").decode(errors="replace")[:VALUE_SHOWN]
        lines = [f"{key} in {parsed.bucket}: revision {entry.revision}: {value}"]
    except nats.js.errors.KeyNotFoundError:
        lines = [f"{key} in {parsed.bucket}: absent"]
    writes = 0
    watcher = await kv.watch(key, meta_only=True)
    try:
        async with asyncio.timeout(WATCH_S):
            started = False
            async for update in watcher:
                # The watch first replays the current value, then marks the end with None.
                if update is None:
                    started = True
                elif started:
                    writes += 1
    except TimeoutError:
        pass
    finally:
        await watcher.stop()  # type: ignore[no-untyped-call]
    lines.append(f"written {writes} times in the next {WATCH_S:g} s")
    return lines


async def _clock_lines(js: JetStreamContext, parsed: NatsUrl) -> list[str]:
    """This machine's clock against the server's, read through the bucket (none without it).
    It is read from a write, which a full store refuses: the report says so and goes on."""
    try:
        kv = await js.key_value(parsed.bucket)
    except nats.js.errors.BucketNotFoundError:
        return []
    try:
        return [await offset_line(lambda: server_time.read_ms(js, kv))]
    except nats.js.errors.APIError as exc:
        return [f"clock: not read (the server refused the write it is read from: {exc})"]


async def report(url: str, key: str | None) -> list[str]:
    parsed = parse_nats_url(url)
    async with guard(Fixes.of(url)):
        return await _report(parsed, key, url)


async def server_report(parsed: NatsUrl, migrate: str) -> StoreReport:
    """What `ServerReport.server_report` answers for the NATS driver: the servers and bucket
    (`migrate`, the line that makes it, when it is missing), then the storage lines. A server
    that does not answer is what the report says."""
    servers = ", ".join(shown_server(server) for server in parsed.servers)
    try:
        lines = await _report(parsed, None)
    except UNAVAILABLE as exc:
        if authorization_refused(exc):
            return StoreReport(
                False,
                [
                    f"server: {servers} answered and refused ({type(exc).__name__}: {exc})",
                    f"{AUTHORIZATION_REFUSED}: correct the URL, or the server's authorization",
                ],
            )
        return StoreReport(
            False,
            [
                f"server: no answer from {servers} ({type(exc).__name__}: {exc})",
                "start nats-server -js there, or point the URL at where it runs",
            ],
        )
    stream = f"stream KV_{parsed.bucket}: "
    made = any(line.startswith(stream) for line in lines)
    bucket = (
        f"bucket {parsed.bucket}" if made else f"bucket {parsed.bucket} missing (run {migrate})"
    )
    return StoreReport(True, [f"servers: {servers}, {bucket}", *lines])


async def _report(parsed: NatsUrl, key: str | None, url: str | None = None) -> list[str]:
    """`url`: the one the fix lines name (`db nats-report`, STORAGE_FULL's fix), which then
    adds how to raise a stream's limit it is at."""
    # Not the driver's connection: one try, and no bucket made where there is none.
    client = await connect(parsed.servers, CONNECT_TIMEOUT_S, reconnect=False)
    js = client.jetstream(timeout=CONNECT_TIMEOUT_S)
    try:
        if key is not None:
            return await _key_lines(js, parsed, key)
        streams = await js.streams_info()
        lines = storage_lines(await js.account_info(), streams)
        if url is not None:
            lines += full_lines(streams, url)
        return lines + await _clock_lines(js, parsed)
    finally:
        await client.close()
