"""The Redis driver's tests: the conformance kit (one runner per kit module) on the server in
MCP_JOBS_TEST_REDIS_URL, skipped with that reason when it is unset.

A fresh database per test is a fresh key prefix on the same server (`?prefix=` in the URL), not
a database number: Redis has 16 numbered databases by default, tests in parallel processes
would have to share them, and a prefix both isolates them and proves that every key the driver
writes lives under its prefix. The test's keys are deleted when it ends.
"""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, cast

import pytest

from engine.drivers import Driver
from engine.testing.plugin import AppTransaction

REDIS_URL_ENV = "MCP_JOBS_TEST_REDIS_URL"


@pytest.fixture(params=["redis"])
def driver_kind(request: pytest.FixtureRequest) -> str:
    kind: str = request.param
    marker = request.node.get_closest_marker("drivers")
    if marker is not None and kind not in marker.args:
        pytest.skip(f"not a {kind} test: {marker.kwargs.get('reason', 'driver-specific')}")
    if not os.environ.get(REDIS_URL_ENV):
        pytest.skip(f"{REDIS_URL_ENV} is not set (.ci/run sets it)")
    pytest.importorskip("redis", reason="the redis extra is not installed")
    return kind


def with_prefix(url: str, prefix: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}prefix={prefix}"


@pytest.fixture
async def database_url(driver_kind: str) -> AsyncIterator[str]:
    """A fresh, empty keyspace: a prefix no other test uses, its keys deleted afterwards."""
    from redis.asyncio import Redis

    base = os.environ[REDIS_URL_ENV]
    prefix = f"mcp-jobs-test:{secrets.token_hex(6)}:"
    yield with_prefix(base, prefix)
    client = Redis.from_url(base, decode_responses=True)
    try:
        doomed = [key async for key in client.scan_iter(match=f"{prefix}*", count=1000)]
        if doomed:
            await _check_types(client, prefix, doomed)
            await client.unlink(*doomed)
    finally:
        await client.aclose()


# Keys under a test's prefix that are not the driver's: the checkout example's own rows.
APP_FAMILIES = ("shop:",)
# A test that opens several stores gives each a prefix of its own below the test's, "s<n>:".
SUB_PREFIX = re.compile(r"s[0-9]+:")


async def _check_types(client: Any, prefix: str, found: list[str]) -> None:
    """Every key the test left is one the layout declares, of the type declared: the table
    `db report` checks a store's keys against (keys.FIXED_KEY_TYPES) is what the driver writes."""
    from engine.drivers.redis.keys import expected_type

    pipe = client.pipeline(transaction=False)
    for key in found:
        pipe.type(key)
    types = await pipe.execute()
    wrong = {}
    for key, kind in zip(found, types, strict=True):
        name = key.removeprefix(prefix)
        if name.startswith(APP_FAMILIES):
            continue
        if expected_type(name) != kind and expected_type(SUB_PREFIX.sub("", name, 1)) != kind:
            wrong[key] = kind
    assert not wrong, f"keys outside the declared layout (key: type): {wrong}"


@asynccontextmanager
async def redis_transaction(driver: Driver, url: str) -> AsyncIterator[Any]:
    """The application's transaction on Redis: a MULTI/EXEC pipeline, executed at the end."""
    from engine.drivers.redis import RedisDriver

    tx = cast(RedisDriver, driver).transaction()
    try:
        yield tx
        await tx.execute()
    finally:
        await tx.reset()


@pytest.fixture
def app_transaction() -> AppTransaction:
    return redis_transaction
