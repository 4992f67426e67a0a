"""A bounded HTTP GET over a real socket, and sample lookup in parsed exposition text."""

from __future__ import annotations

import anyio
from prometheus_client.parser import text_string_to_metric_families


async def http_get(
    port: int,
    path: str = "/metrics",
    *,
    method: str = "GET",
    accept: str | None = None,
    host: str = "127.0.0.1",
) -> tuple[int, dict[str, str], bytes]:
    """One request to `host`:`port`; (status, lower-cased headers, body). At most 10 s."""
    request = f"{method} {path} HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n"
    if accept is not None:
        request += f"Accept: {accept}\r\n"
    with anyio.fail_after(10):
        async with await anyio.connect_tcp(host, port) as stream:
            await stream.send((request + "\r\n").encode("latin-1"))
            chunks: list[bytes] = []
            try:
                while True:
                    chunks.append(await stream.receive())
            except anyio.EndOfStream:
                pass
    head, _, body = b"".join(chunks).partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(status_line.split(" ")[1]), headers, body


def samples(text: str) -> list[tuple[str, dict[str, str], float]]:
    """Every sample in Prometheus text exposition, parsed by prometheus-client's own parser."""
    return [
        (s.name, dict(s.labels), s.value)
        for family in text_string_to_metric_families(text)
        for s in family.samples
    ]


def value(text: str, metric: str, /, **labels: str) -> float | None:
    """The one sample `name` whose labels include `labels`; None when there is none."""
    found = [v for n, ls, v in samples(text) if n == metric and labels.items() <= ls.items()]
    assert len(found) <= 1, f"{metric}{labels} matches {len(found)} samples"
    return found[0] if found else None
