"""A URL with no password to a server that asks for one (requirepass): the refusal quoted the
server's reply, "HELLO must be called with the client already authenticated, otherwise the
HELLO AUTH <user> <pass> option can be used…", and `db report` then said "correct the URL, or
the server's ACL or settings". It now says the server asks for a password the URL does not
give, and where in this URL it goes."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine import ManualClock
from engine.driver_errors import DatabaseUrlInvalidError
from engine.drivers import open_driver
from engine.drivers.base import REPORT, require

pytest.importorskip("redis", reason="the redis extra is not installed")

from tests.redis.server import own_server

ASKS = "the server asks for a password (its requirepass, or an ACL user's) and the URL gives none"


@pytest.mark.slow
async def test_a_url_without_the_password_the_server_asks_for_says_so(tmp_path: Path) -> None:
    with own_server(tmp_path) as server:
        admin = server.client()
        try:
            admin.config_set("requirepass", "s3cret")
        finally:
            admin.close()
        url = f"redis://127.0.0.1:{server.port}/0"
        driver = open_driver(url, clock=ManualClock(), connect_timeout_s=2)
        try:
            with pytest.raises(DatabaseUrlInvalidError) as refused:
                await driver.migrate()
            report = await require(driver, REPORT).server_report()
        finally:
            await driver.close()
    cause = refused.value.cause
    assert ASKS in cause, cause
    assert "HELLO" not in cause
    form = f"redis://:PASSWORD@127.0.0.1:{server.port}/0"
    assert form in cause
    assert not report.reachable
    assert report.lines[1].startswith(ASKS), report.lines
    assert form in report.lines[1] and "HELLO" not in report.lines[1]
    assert "correct the URL, or the server's ACL" not in report.lines[1]
