"""A server that refuses the URL's user, password or token: DATABASE_URL_INVALID at once (no
retry helps), and a report that says so; no output of the driver shows the password."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from engine import ManualClock
from engine.drivers.nats import NatsDriver
from engine.drivers.urls import redact
from tests.nats.server import NatsServer, binary_or_skip
from tests.support.url_refusals import check_answered_refusal, refused_and_reported

PASSWORD = "s3cret-Pa55"


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsServer]:
    binary = binary_or_skip()
    root = tmp_path_factory.mktemp("nats-login")
    server = NatsServer(binary, root / "store", name="login", login=("alice", PASSWORD))
    server.start()
    try:
        yield server
    finally:
        server.stop()


def _url(server: NatsServer, login: str) -> str:
    return f"nats://{login}127.0.0.1:{server.port}/jobs"


@pytest.mark.parametrize("login", ["alice:wrong@", "", "some-token@"])
async def test_a_refused_login_is_database_url_invalid_and_its_report_says_so(
    guarded: NatsServer, clock: ManualClock, login: str
) -> None:
    url = _url(guarded, login)
    error, report = await refused_and_reported(NatsDriver(url, clock=clock))
    # Without credentials the server also closes the session: the refusal, not that reset.
    check_answered_refusal(error, url)
    assert "the server refused the URL's user, password or token" in error.cause
    assert not report.reachable
    assert report.lines == [
        f"server: nats://127.0.0.1:{guarded.port} answered and refused "
        "(Error: nats: 'Authorization Violation')",
        "the server refused the URL's user, password or token: correct the URL, or the "
        "server's authorization",
    ]


async def test_the_report_of_a_server_let_in_does_not_print_the_password(
    guarded: NatsServer, clock: ManualClock
) -> None:
    url = _url(guarded, f"alice:{PASSWORD}@")
    driver = NatsDriver(url, clock=clock)
    try:
        await driver.migrate()
        report = await driver.server_report()
    finally:
        await driver.close()
    assert report.reachable
    assert report.lines[0] == f"servers: nats://127.0.0.1:{guarded.port}, bucket jobs"
    assert not [line for line in report.lines if PASSWORD in line]
    assert PASSWORD not in redact(url)
