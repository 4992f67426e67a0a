"""What the Redis driver makes of its URL: one it cannot use is refused before anything
connects, one the server answers and refuses is DATABASE_URL_INVALID, a server that does not
answer is DRIVER_UNAVAILABLE, and the key prefix comes from the URL or the option."""

from __future__ import annotations

import os
from typing import cast

import anyio
import pytest

from engine import ManualClock
from engine.driver_errors import DatabaseUrlInvalidError
from engine.drivers import open_driver
from engine.errors import JobsError
from tests.redis.conftest import REDIS_URL_ENV
from tests.support.fix_lines import run_fix
from tests.support.url_refusals import check_answered_refusal, refused_and_reported

pytest.importorskip("redis", reason="the redis extra is not installed")

from engine.drivers.redis import RedisDriver


@pytest.fixture
def redis_server() -> str:
    url = os.environ.get(REDIS_URL_ENV)
    if not url:
        pytest.skip(f"{REDIS_URL_ENV} is not set (.ci/run sets it)")
    return url


async def test_an_unreachable_server_is_driver_unavailable(clock: ManualClock) -> None:
    driver = open_driver("redis://127.0.0.1:1/0", clock=clock, connect_timeout_s=0.5)
    try:
        with pytest.raises(JobsError) as raised:
            await driver.migrate()
    finally:
        await driver.close()
    assert raised.value.code == "DRIVER_UNAVAILABLE"
    # The server the driver was given, not whatever $MCP_JOBS_DATABASE_URL holds where it runs.
    assert raised.value.fix == "mcp-jobs db report --database-url redis://127.0.0.1:1/0"
    assert raised.value.__cause__ is not None  # the redis-py error, chained
    # Run as given: the report says what is wrong.
    output = await anyio.to_thread.run_sync(lambda: run_fix(raised.value.fix))
    assert "server: no answer from 127.0.0.1:1 (ConnectionError" in output


@pytest.mark.parametrize(
    ("asked", "said"),
    [
        ("/999", "the server has fewer databases than the number after the URL's host"),
        ("/0?username=no_such_user_{tag}", "the server refused the URL's user or password"),
    ],
)
async def test_a_url_the_server_refuses_is_database_url_invalid(
    redis_server: str, clock: ManualClock, asked: str, said: str
) -> None:
    """A database number the server lacks, or a user it does not know, is refused the same way
    every time: not DRIVER_UNAVAILABLE, which an agent would retry and a worker wait on."""
    server = redis_server.split("://", 1)[1].split("/", 1)[0]
    url = f"redis://{server}{asked.format(tag=os.urandom(4).hex())}"
    error, report = await refused_and_reported(open_driver(url, clock=clock))
    check_answered_refusal(error, url)
    assert said in error.cause
    assert not report.reachable
    assert report.lines[0].startswith(f"server: {server} answered and refused (")
    assert report.lines[1].startswith(said)


@pytest.mark.parametrize(
    "url", ["redis://", "redis://localhost/zero", "redis://localhost:6379/0/extra"]
)
def test_a_url_redis_could_not_use_is_refused_before_connecting(url: str) -> None:
    with pytest.raises(JobsError) as raised:
        open_driver(url)
    assert raised.value.code == "DATABASE_URL_INVALID"
    assert isinstance(raised.value, DatabaseUrlInvalidError) and not raised.value.answered


def test_the_prefix_comes_from_the_url_or_the_option() -> None:
    assert cast(RedisDriver, open_driver("redis://localhost/0?prefix=app:")).prefix == "app:"
    given = open_driver("redis://localhost/0", prefix="other:")
    assert cast(RedisDriver, given).prefix == "other:"
    assert cast(RedisDriver, open_driver("rediss://localhost/0")).prefix == "mcp-jobs:"
