"""What a one-shot command says when its NATS server does not answer: DRIVER_UNAVAILABLE whose
cause names the server and how long it waited (asyncio's own timeout says nothing), and no
"reconnecting" warning before it: a command that never connected reconnects nothing. On a
server this test starts, stops (SIGSTOP) and kills itself."""

from __future__ import annotations

import logging
import signal
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from engine import ManualClock
from engine.driver_errors import DriverUnavailableError
from tests.nats.server import NatsServer, binary_or_skip

pytest.importorskip("nats", reason="the nats extra is not installed")

from engine.drivers.nats import NatsDriver

pytestmark = pytest.mark.slow


@pytest.fixture
def server(tmp_path: Path) -> Iterator[NatsServer]:
    started = NatsServer(binary_or_skip(), tmp_path / "store", name="outage")
    started.start()
    try:
        yield started
    finally:
        if started.process is not None:
            started.process.send_signal(signal.SIGCONT)
        started.stop()


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "mcp_jobs.nats" and r.levelno >= logging.WARNING
    ]


async def _refused(url: str) -> DriverUnavailableError:
    driver = NatsDriver(url, clock=ManualClock(), connect_timeout_s=0.5)
    try:
        with anyio.fail_after(30), pytest.raises(DriverUnavailableError) as refused:
            await driver.migrate()
    finally:
        await driver.close()
    return refused.value


async def test_a_server_that_does_not_answer_is_named_with_the_wait(
    server: NatsServer, caplog: pytest.LogCaptureFixture
) -> None:
    assert server.process is not None
    server.process.send_signal(signal.SIGSTOP)  # connections accepted, nothing answered
    caplog.set_level(logging.DEBUG, logger="mcp_jobs.nats")
    error = await _refused(f"{server.url}/outage")
    assert f"127.0.0.1:{server.port}" in error.cause
    assert "within 0.5 s" in error.cause
    assert not _warnings(caplog)


async def test_a_server_that_is_not_running_is_named_and_not_reconnected(
    server: NatsServer, caplog: pytest.LogCaptureFixture
) -> None:
    server.kill()
    caplog.set_level(logging.DEBUG, logger="mcp_jobs.nats")
    error = await _refused(f"{server.url}/outage")
    assert str(server.port) in error.cause
    assert not _warnings(caplog)
