"""Streamable HTTP sessions as tenants sharing one server meet them: a session answers only the
principal (token subject, client and tenant) that opened it, each principal keeps at most its
share of the session bound (its oldest idle session closed to make room), and an ended session's
id answers 404 saying to initialize a new one. Every server here is the real one `mcp-jobs
serve` runs, on a free loopback port."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from contextlib import AsyncExitStack
from typing import Any

import httpx2
import pytest

from mcp_jobs.config import OAuthSettings, Settings
from mcp_jobs.server.http_refusals import SERVER_BUSY, explain
from tests.mcp.http_support import (
    LIST_TOOLS,
    bearer,
    in_session,
    listening_to,
    open_session,
    refusal,
    running,
)
from tests.mcp.oauth_issuer import AUDIENCE, Issuer, issuer
from tests.mcp.support import INITIALIZE

TOKEN = "a-loopback-token"
WRITER = "jobs:read jobs:write"


@pytest.fixture
def idp() -> Iterator[Issuer]:
    with issuer() as made:
        yield made


def _oauth(idp: Issuer, **overrides: Any) -> Settings:
    oauth = OAuthSettings(issuer=idp.url, resource_url=AUDIENCE, audience=AUDIENCE)
    return Settings(**{"port": 0, "oauth": oauth, **overrides})


async def _answer(
    http: httpx2.AsyncClient, method: str, url: str, headers: dict[str, str]
) -> tuple[int, bytes]:
    """The status and body of one request; a GET's event stream, were it opened, is left at
    once rather than read."""
    content = None if method != "POST" else httpx2.Request("POST", url, json=LIST_TOOLS).content
    if method == "GET":
        headers = {**headers, "Accept": "text/event-stream"}
    async with http.stream(method, url, headers=headers, content=content) as answer:
        if answer.status_code == 200 and method == "GET":
            return answer.status_code, b""
        return answer.status_code, await answer.aread()


# --- a session belongs to the principal that opened it ------------------------------------------


async def test_a_session_answers_only_the_principal_that_opened_it(idp: Issuer) -> None:
    owner = idp.token(WRITER, tenant="acme")
    others = {
        "another tenant": idp.token("jobs:read", tenant="bravo"),
        "no tenant": idp.token(WRITER),
        "another subject": idp.token(WRITER, tenant="acme", subject="agent-2"),
    }
    async with running(_oauth(idp)) as listening, httpx2.AsyncClient() as http:
        url = listening.url
        session = await open_session(http, url, owner)
        for method in ("POST", "GET", "DELETE"):
            # Answered as a session that does not exist: nothing says this one does.
            unknown = await _answer(http, method, url, in_session(owner, uuid.uuid4().hex))
            assert unknown[0] == 404
            for why, token in others.items():
                taken = await _answer(http, method, url, in_session(token, session))
                assert taken == unknown, (why, method, taken)
        # Its owner's session lived through all of it, and the owner may listen on it.
        served = await http.post(url, json=LIST_TOOLS, headers=in_session(owner, session))
        assert served.status_code == 200, served.text
        async with http.stream("GET", url, headers=listening_to(owner, session)) as listen:
            assert listen.status_code == 200


async def test_one_static_token_is_one_principal() -> None:
    async with running(Settings(port=0, token=TOKEN)) as listening, httpx2.AsyncClient() as http:
        session = await open_session(http, listening.url, TOKEN)
        # Another client holding the same token is the same principal.
        async with httpx2.AsyncClient() as other:
            answer = await other.post(
                listening.url, json=LIST_TOOLS, headers=in_session(TOKEN, session)
            )
        assert answer.status_code == 200


async def test_session_ids_stay_out_of_the_info_log(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    async with running(Settings(port=0, token=TOKEN)) as listening, httpx2.AsyncClient() as http:
        session = await open_session(http, listening.url, TOKEN)
        await http.post(listening.url, json=LIST_TOOLS, headers=in_session(TOKEN, session))
        await http.delete(listening.url, headers=in_session(TOKEN, session))
        await http.post(listening.url, json=LIST_TOOLS, headers=in_session(TOKEN, session))
    assert session not in caplog.text


# --- each principal's share of the session bound ------------------------------------------------


async def test_a_principal_at_its_share_closes_its_oldest_idle_session(idp: Issuer) -> None:
    a, b = idp.token(tenant="acme"), idp.token(tenant="bravo")
    # A quarter of 8: two sessions a principal.
    async with running(_oauth(idp, max_sessions=8)) as listening, httpx2.AsyncClient() as http:
        url = listening.url
        first = await open_session(http, url, a)
        second = await open_session(http, url, a)
        third = await open_session(http, url, a)
        closed = await http.post(url, json=LIST_TOOLS, headers=in_session(a, first))
        assert closed.status_code == 404
        for kept in (second, third):
            answer = await http.post(url, json=LIST_TOOLS, headers=in_session(a, kept))
            assert answer.status_code == 200, answer.text
        # A filling its share (again and again) holds nobody else up.
        for _ in range(3):
            await open_session(http, url, a)
        for _ in range(2):
            await open_session(http, url, b)


async def test_a_principal_whose_sessions_are_all_busy_alone_is_refused(idp: Issuer) -> None:
    a, b = idp.token(tenant="acme"), idp.token(tenant="bravo")
    async with running(_oauth(idp, max_sessions=8)) as listening, httpx2.AsyncClient() as http:
        url = listening.url
        sessions = [await open_session(http, url, a) for _ in range(2)]
        async with AsyncExitStack() as streams:
            # An open GET stream holds its session busy: nothing idle to close.
            for session in sessions:
                listen = await streams.enter_async_context(
                    http.stream("GET", url, headers=listening_to(a, session))
                )
                assert listen.status_code == 200
            over = await http.post(url, json=INITIALIZE, headers=bearer(a))
            said = refusal(over, 503)
            assert said["error"]["code"] == SERVER_BUSY
            assert int(over.headers["retry-after"]) > 0
            assert "DELETE" in said["error"]["message"]
            # The busy sessions are served, and another principal opens its own.
            for session in sessions:
                answer = await http.post(url, json=LIST_TOOLS, headers=in_session(a, session))
                assert answer.status_code == 200
            await open_session(http, url, b)


async def test_one_static_token_keeps_the_whole_bound() -> None:
    # One principal: its share is the whole bound, and at it its oldest idle session makes room.
    settings = Settings(port=0, token=TOKEN, max_sessions=3)
    async with running(settings) as listening, httpx2.AsyncClient() as http:
        url = listening.url
        sessions = [await open_session(http, url, TOKEN) for _ in range(4)]
        statuses = [
            (await http.post(url, json=LIST_TOOLS, headers=in_session(TOKEN, s))).status_code
            for s in sessions
        ]
        assert statuses == [404, 200, 200, 200]


async def test_the_whole_bound_filled_by_others_is_said_with_the_operators_fix(
    idp: Issuer,
) -> None:
    settings = _oauth(idp, max_sessions=4, session_idle_seconds=90.5)
    async with running(settings) as listening, httpx2.AsyncClient() as http:
        url = listening.url
        for tenant in ("a", "b", "c", "d"):
            await open_session(http, url, idp.token(tenant=tenant))
        over = await http.post(url, json=INITIALIZE, headers=bearer(idp.token(tenant="e")))
        said = refusal(over, 503)
        assert said["error"]["code"] == SERVER_BUSY
        # By then every session idle now has been closed.
        assert over.headers["retry-after"] == "91"
        message = said["error"]["message"]
        for named in ("MCP_JOBS_MAX_SESSIONS", "--session-idle-seconds", "1 a token"):
            assert named in message, named
        # Not the refused client's to mend: no DELETE of sessions it does not hold.
        assert "DELETE" not in message
        assert "--max-sessions 8" in message and "mcp-jobs serve" in message


# --- an ended session ---------------------------------------------------------------------------


async def test_an_ended_session_says_to_initialize_a_new_one() -> None:
    settings = Settings(port=0, token=TOKEN, session_idle_seconds=90)
    async with running(settings) as listening, httpx2.AsyncClient() as http:
        url = listening.url
        ended = await open_session(http, url, TOKEN)
        assert (await http.delete(url, headers=in_session(TOKEN, ended))).status_code == 200
        call = {"jsonrpc": "2.0", "id": 7, "method": "tools/list"}
        for session in (ended, uuid.uuid4().hex):
            answer = await http.post(url, json=call, headers=in_session(TOKEN, session))
            said = refusal(answer, 404)
            assert said["id"] == 7
            message = said["error"]["message"]
            for named in ("restart", "--session-idle-seconds", "90", "initialize"):
                assert named in message, named
        # A GET has no id to echo.
        listen = await http.get(url, headers=listening_to(TOKEN, ended))
        assert refusal(listen, 404)["id"] is None


def test_a_session_the_transport_has_terminated_is_explained_too() -> None:
    # Between its end and its removal the transport answers in its own words.
    scope = {"type": "http", "method": "POST", "headers": [(b"mcp-session-id", b"abc")]}
    start = {"type": "http.response.start", "status": 404, "headers": []}
    body = (
        b'{"jsonrpc":"2.0","id":null,"error":{"code":-32600,'
        b'"message":"Not Found: Session has been terminated"}}'
    )
    said = explain(scope, start, body, Settings())
    assert said is not None and "initialize" in said.message
