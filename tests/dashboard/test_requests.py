"""How the dashboard answers what is not a page's own refusal: the database away is 503 with
Retry-After (a client's request was fine); a query parameter no page filter has, or one given
twice, is refused with the typed error page rather than dropped (a wider list than asked for);
a POST whose client declares a body too large, or drops before sending it, is answered at once
and logs no unexpected failure."""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import quote

import anyio
import pytest

from engine import Jobs
from engine.driver_errors import DriverUnavailableError
from mcp_jobs.dashboard.auth import standalone_auth
from mcp_jobs.dashboard.routing import dashboard_routes_app
from tests.dashboard.support import Marks, Seeded, browse, dashboard_for

pytestmark = pytest.mark.drivers("memory", reason="the answers do not depend on the driver")


async def test_the_database_away_is_503_with_retry_after(
    jobs: Jobs, seeded: Seeded, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def away(*args: Any, **kwargs: Any) -> Any:
        raise DriverUnavailableError("redis", "ConnectionError: refused", "mcp-jobs db report")

    monkeypatch.setattr(jobs.driver, "list_jobs", away)
    monkeypatch.setattr(jobs.driver, "stats", away)
    async with browse(dashboard_for(jobs)) as http:
        for page in ("/jobs", "/"):
            answer = await http.get(page)
            assert answer.status_code == 503, page
            assert int(answer.headers["retry-after"]) > 0
            assert "DRIVER_UNAVAILABLE" in answer.text
            # Browsers ignore Retry-After: the page asks again itself, so a wall screen recovers.
            wait = answer.headers["retry-after"]
            assert f'<meta http-equiv="refresh" content="{wait}">' in answer.text, page
        # A refused value is still the client's: 400, and asking again will not mend it.
        refused = await http.get("/jobs?state=nope")
        assert refused.status_code == 400 and 'http-equiv="refresh"' not in refused.text


async def test_a_page_whose_reads_hang_answers_503_at_its_one_deadline_saying_it(
    jobs: Jobs, seeded: Seeded, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A database that accepts and never answers: every read blocks until cancelled. The page
    gives up at its one deadline (not one per read, nor the driver's own bounds in turn) and
    says that figure."""

    async def hangs(*args: Any, **kwargs: Any) -> Any:
        await anyio.sleep_forever()

    monkeypatch.setattr(jobs.driver, "list_jobs", hangs)
    monkeypatch.setattr(jobs.driver, "stats", hangs)
    dash = dashboard_for(jobs)
    dash.read_deadline_ms = 100
    async with browse(dash) as http:
        for page in ("/", "/jobs"):
            with anyio.fail_after(10):  # bounded: without a page deadline it never answers
                answer = await http.get(page)
            assert answer.status_code == 503, page
            assert Marks(answer.text).one("error-code").text == "DRIVER_UNAVAILABLE"
            assert "0.1 s" in Marks(answer.text).one("error-cause").text, answer.text


@pytest.mark.parametrize(
    ("query", "named"),
    [
        ("tenant_id=t%0A1", "tenant"),
        ("states=dead", "state"),
        ("bogus=1", None),
    ],
)
async def test_an_unknown_filter_is_refused_naming_the_one_meant(
    jobs: Jobs, seeded: Seeded, query: str, named: str | None
) -> None:
    async with browse(dashboard_for(jobs)) as http:
        answer = await http.get(f"/jobs?{query}")
    assert answer.status_code == 400
    assert "INVALID_ARGUMENT" in answer.text
    assert not Marks(answer.text).all("job-row")  # no list, let alone every job
    if named is not None:
        assert f"meant {named}?" in answer.text
        value = query.split("=", 1)[1]
        assert f"/jobs?{named}={value}" in answer.text  # the page as meant, to open


async def test_a_filter_given_twice_is_refused(jobs: Jobs, seeded: Seeded) -> None:
    async with browse(dashboard_for(jobs)) as http:
        answer = await http.get("/jobs?state=dead&state=ready")
        assert answer.status_code == 400 and "INVALID_ARGUMENT" in answer.text
        assert not Marks(answer.text).all("job-row")
        # What works keeps working: each filter once, and the next page's cursor.
        dead = await http.get("/jobs?state=dead&tenant=")
        assert dead.status_code == 200
        rows = Marks(dead.text).all("job-row")
        assert rows and {r.attrs["data-state"] for r in rows} == {"dead"}
        assert (await http.get(f"/dead?queue={quote('orders')}")).status_code == 200
        assert (await http.get("/dead?queues=orders")).status_code == 400


async def _post(app: Any, path: str, messages: list[dict[str, Any]], length: int) -> list[Any]:
    """POST `path` to the ASGI app, its body arriving as `messages`; the messages sent back."""
    sent: list[Any] = []
    pending = list(messages)

    async def receive() -> dict[str, Any]:
        return pending.pop(0) if pending else {"type": "http.disconnect"}

    async def send(message: Any) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [
            (b"host", b"127.0.0.1"),
            (b"content-type", b"application/x-www-form-urlencoded"),
            (b"content-length", str(length).encode()),
        ],
        "client": ("127.0.0.1", 5555),
        "server": ("127.0.0.1", 80),
    }
    await app(scope, receive, send)
    return sent


async def test_a_client_dropping_mid_post_logs_no_unexpected_failure(
    jobs: Jobs, seeded: Seeded, caplog: pytest.LogCaptureFixture
) -> None:
    live = seeded.one("ready")
    dash = dashboard_for(jobs)
    app = dashboard_routes_app(dash, standalone_auth(dash.settings))
    here = f"/jobs/{live}/cancel"
    body = f"csrf={dash.csrf(here)}".encode()
    caplog.set_level(logging.INFO)
    # The client declares more than it sends, then goes.
    await _post(app, here, [{"type": "http.request", "body": body, "more_body": True}], 4000)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text
    assert (await jobs.get(live)).state == "ready"


async def test_a_post_declaring_a_body_too_large_is_refused_before_it_is_read(
    jobs: Jobs, seeded: Seeded
) -> None:
    live = seeded.one("ready")
    dash = dashboard_for(jobs)
    app = dashboard_routes_app(dash, standalone_auth(dash.settings))
    # No message of the body is ever sent: an answer that waited for it would never come.
    sent = await _post(app, f"/jobs/{live}/cancel", [], 99_999_999)
    assert sent and sent[0]["status"] == 413
    assert (await jobs.get(live)).state == "ready"
