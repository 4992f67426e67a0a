"""A fixture starting nats-servers with the max_payload a test gives, for the tests of what a
server too small for a value answers (imported by name where used)."""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.nats.server import NatsServer, binary_or_skip

# max_payload -> the URL of a fresh bucket on a server started with it.
Serve = Callable[[int], str]


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Serve]:
    """Start a nats-server whose max_payload is the value given; its URL, a fresh bucket."""
    binary = binary_or_skip()
    started: list[NatsServer] = []

    def start(max_payload: int) -> str:
        name = f"p{len(started)}"
        # The helper writes only a jetstream block: this closes it, sets the top-level
        # max_payload, and opens another for the helper's closing brace.
        server = NatsServer(
            binary,
            tmp_path / name / "store",
            name=name,
            jetstream=f"max_memory_store: 64MB\n}}\nmax_payload: {max_payload}\njetstream {{",
        )
        (tmp_path / name).mkdir()
        started.append(server)
        server.start()
        return f"{server.url}/b{secrets.token_hex(4)}"

    try:
        yield start
    finally:
        for server in started:
            server.stop()
