"""The NATS driver's tests: the conformance kit (one runner per kit module) on the server in
MCP_JOBS_TEST_NATS_URL, or else on a nats-server this session starts itself (free port,
temporary store); skipped with that reason when neither is there.

A fresh database per test is a fresh KV bucket on the same server (the URL's path names it),
deleted when the test ends.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, cast

import pytest

from engine.drivers import Driver
from engine.testing.plugin import AppTransaction
from tests.nats.max_payload_server import serve as serve  # the fixture, for the tests of it
from tests.nats.server import NatsServer, server_binary

NATS_URL_ENV = "MCP_JOBS_TEST_NATS_URL"


@pytest.fixture(scope="session")
def nats_base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str | None]:
    """The server the tests use: $MCP_JOBS_TEST_NATS_URL, or one started here, or None."""
    given = os.environ.get(NATS_URL_ENV)
    if given:
        yield given.rstrip("/")
        return
    binary = server_binary()
    if binary is None:
        yield None
        return
    root: Path = tmp_path_factory.mktemp("nats")
    server = NatsServer(binary, root / "store")
    server.start()
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture(params=["nats"])
def driver_kind(request: pytest.FixtureRequest, nats_base_url: str | None) -> str:
    kind: str = request.param
    marker = request.node.get_closest_marker("drivers")
    if marker is not None and kind not in marker.args:
        pytest.skip(f"not a {kind} test: {marker.kwargs.get('reason', 'driver-specific')}")
    pytest.importorskip("nats", reason="the nats extra is not installed")
    if nats_base_url is None:
        pytest.skip(f"{NATS_URL_ENV} is not set and no nats-server binary is installed")
    return kind


@pytest.fixture
async def database_url(driver_kind: str, nats_base_url: str) -> AsyncIterator[str]:
    """A fresh, empty namespace: a bucket no other test uses, deleted afterwards."""
    import nats
    import nats.js.errors

    bucket = f"mcpjobs_test_{secrets.token_hex(6)}"
    yield f"{nats_base_url}/{bucket}"
    client = await nats.connect(nats_base_url)
    try:
        # A test that never opened the driver made no bucket.
        with contextlib.suppress(nats.js.errors.NotFoundError):
            await client.jetstream().delete_key_value(bucket)
    finally:
        await client.close()


@asynccontextmanager
async def nats_transaction(driver: Driver, url: str) -> AsyncIterator[Any]:
    """The application's batch on NATS: its rows are written when the block ends."""
    from engine.drivers.nats import NatsDriver

    tx = cast(NatsDriver, driver).transaction()
    yield tx
    await tx.commit()


@pytest.fixture
def app_transaction() -> AppTransaction:
    return nats_transaction
