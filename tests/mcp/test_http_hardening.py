"""Streamable HTTP hardening: the token rules (a bind beyond loopback needs 32 characters), the
token file, refused requests logged without the token, idle sessions closed, live sessions
bounded, and the start line. Every server here is the real one `mcp-jobs serve` runs
(`serve_http`), on a free loopback port."""

from __future__ import annotations

import logging
import re
import socket
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from engine import JobRegistry, connect
from mcp_jobs.cli.entry import main
from mcp_jobs.cli.parser import UsageError, build_parser
from mcp_jobs.config import Settings, http_settings
from mcp_jobs.dashboard.auth import standalone_auth
from mcp_jobs.errors import (
    HttpBindError,
    HttpSettingInvalidError,
    TokenConflictError,
    TokenFileError,
    TokenRequiredError,
    TokenTooShortError,
    new_token_line,
    token_file_line,
)
from mcp_jobs.server import build_server
from mcp_jobs.server.http import is_loopback, refusal_reason, require_token
from mcp_jobs.server.http_refusals import SERVER_BUSY
from mcp_jobs.server.http_serve import Listening, bind, serve_http
from mcp_jobs.server.request_ids import INVALID_ID
from tests.mcp.support import INITIALIZE, declare_app
from tests.support.fix_lines import run_fix

TOKEN = "a-loopback-token"
LONG_TOKEN = "f" * 64
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
LIST_TOOLS = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
SESSION = "mcp-session-id"


# --- the token rules ----------------------------------------------------------------------------


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "::1", "[::1]", "localhost"])
def test_loopback_keeps_any_token(host: str) -> None:
    assert is_loopback(host)
    assert require_token(Settings(host=host, token="x")) == "x"


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.20", "10.0.0.1", "jobs.example"])
def test_beyond_loopback_needs_32_characters(host: str) -> None:
    assert not is_loopback(host)
    with pytest.raises(TokenTooShortError) as refused:
        require_token(Settings(host=host, token="x" * 31))
    assert refused.value.fix == new_token_line()
    assert refused.value.details == {"host": host, "length": 31, "minimum": 32}
    assert "x" * 31 not in str(refused.value.to_payload())
    assert require_token(Settings(host=host, token="x" * 32)) == "x" * 32


def test_no_token_is_refused_on_any_host() -> None:
    for host in ("127.0.0.1", "0.0.0.0"):
        with pytest.raises(TokenRequiredError):
            require_token(Settings(host=host, token=None))


def test_a_short_token_from_a_file_is_fixed_in_the_file(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text("short\n")
    settings = http_settings(Settings(host="0.0.0.0"), token_file=str(path))
    assert settings.token == "short"
    with pytest.raises(TokenTooShortError) as refused:
        require_token(settings)
    assert refused.value.fix == token_file_line(str(path))


def test_the_cli_refuses_a_short_token_beyond_loopback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MCP_JOBS_TOKEN", "short-token")
    monkeypatch.delenv("MCP_JOBS_TOKEN_FILE", raising=False)
    url = f"sqlite:///{tmp_path}/jobs.db"
    argv = ["serve", "--transport", "http", "--host", "0.0.0.0", "--port", "0"]
    assert main([*argv, "--database-url", url]) == 1
    shown = capsys.readouterr()
    out = shown.out + shown.err
    assert "HTTP_TOKEN_TOO_SHORT" in out
    assert f"fix:   {new_token_line()}" in out
    assert "short-token" not in out
    assert not (tmp_path / "jobs.db").exists()  # refused before the database opened


# --- the token file and the session settings ----------------------------------------------------


def test_token_file_flag_env_and_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MCP_JOBS_TOKEN_FILE", raising=False)
    path = tmp_path / "token"
    path.write_text(f"{LONG_TOKEN}\n")
    got = http_settings(Settings(), token_file=str(path))
    assert (got.token, got.token_source) == (LONG_TOKEN, str(path))
    monkeypatch.setenv("MCP_JOBS_TOKEN_FILE", str(path))
    assert http_settings(Settings()).token == LONG_TOKEN

    with pytest.raises(TokenConflictError) as conflict:
        http_settings(Settings(token="from-env"))
    assert conflict.value.fix == "unset MCP_JOBS_TOKEN"

    monkeypatch.delenv("MCP_JOBS_TOKEN_FILE")
    empty = tmp_path / "empty"
    empty.write_text("\n")
    for missing in (empty, tmp_path / "absent", tmp_path / "no-such-dir" / "token"):
        with pytest.raises(TokenFileError) as unreadable:
            http_settings(Settings(), token_file=str(missing))
        assert unreadable.value.fix == token_file_line(str(missing))
        # Run as given: a token of 64 hex digits, the owner's alone, that the server reads.
        run_fix(unreadable.value.fix)
        assert re.fullmatch("[0-9a-f]{64}\n", missing.read_text())
        assert missing.stat().st_mode & 0o777 == 0o600
        assert http_settings(Settings(), token_file=str(missing)).token == missing.read_text()[:-1]


def test_the_new_token_line_runs_where_openssl_is_not() -> None:
    made = run_fix(f'{new_token_line()} && printf %s "$MCP_JOBS_TOKEN"')
    assert re.fullmatch("[0-9a-f]{64}", made)


def test_session_settings_flags_win_over_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MCP_JOBS_TOKEN_FILE", raising=False)
    defaults = http_settings(Settings())
    assert (defaults.session_idle_seconds, defaults.max_sessions) == (1800.0, 1000)
    monkeypatch.setenv("MCP_JOBS_SESSION_IDLE_SECONDS", "90")
    monkeypatch.setenv("MCP_JOBS_MAX_SESSIONS", "7")
    from_env = http_settings(Settings())
    assert (from_env.session_idle_seconds, from_env.max_sessions) == (90.0, 7)
    flags = http_settings(Settings(), session_idle_seconds=5.0, max_sessions=3)
    assert (flags.session_idle_seconds, flags.max_sessions) == (5.0, 3)

    for bad in ("0", "-1", "soon", "nan"):
        monkeypatch.setenv("MCP_JOBS_SESSION_IDLE_SECONDS", bad)
        with pytest.raises(HttpSettingInvalidError) as invalid:
            http_settings(Settings())
        assert invalid.value.fix == "export MCP_JOBS_SESSION_IDLE_SECONDS=1800"
    monkeypatch.delenv("MCP_JOBS_SESSION_IDLE_SECONDS")
    monkeypatch.setenv("MCP_JOBS_MAX_SESSIONS", "2.5")
    with pytest.raises(HttpSettingInvalidError):
        http_settings(Settings())


def test_serve_flags_parse_and_refuse_nonsense() -> None:
    parser = build_parser()
    args = parser.parse_args(
        ["serve", "--token-file", "t", "--session-idle-seconds", "0.5", "--max-sessions", "4"]
    )
    assert (args.token_file, args.session_idle_seconds, args.max_sessions) == ("t", 0.5, 4)
    for bad in (["--session-idle-seconds", "0"], ["--max-sessions", "-3"]):
        with pytest.raises(UsageError) as refused:
            parser.parse_args(["serve", *bad])
        assert refused.value.prog == "mcp-jobs serve" and bad[0] in refused.value.message


def test_a_busy_port_is_a_typed_error() -> None:
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    port = taken.getsockname()[1]
    try:
        with pytest.raises(HttpBindError) as busy:
            bind("127.0.0.1", port)
        # A port free now, as the flag the CLI sets in the command that failed.
        assert busy.value.flag == "--port" and busy.value.set_anyway
        assert isinstance(busy.value.nearest, int) and busy.value.nearest != port
        assert busy.value.fix == f"mcp-jobs serve --transport http --port {busy.value.nearest}"
    finally:
        taken.close()


# --- a real server ------------------------------------------------------------------------------


class Watch(logging.Handler):
    """Collects records and sets an event once `done(records)` holds: a bounded wait on what the
    server logs, instead of sleeping."""

    def __init__(self, done: Callable[[list[logging.LogRecord]], bool]) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []
        self.done = done
        self.event = anyio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)
        if self.done(self.records):
            self.event.set()


@asynccontextmanager
async def running(settings: Settings) -> AsyncIterator[Listening]:
    registry = JobRegistry()
    declare_app(registry)
    jobs = await connect("memory://", registry=registry)
    try:
        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                server = build_server(settings, jobs, http=True)
                listening: Listening = await tg.start(serve_http, server, settings)
                try:
                    yield listening
                finally:
                    listening.stop()
    finally:
        await jobs.close()


def _settings(**overrides: Any) -> Settings:
    return Settings(**{"port": 0, "token": TOKEN, **overrides})


async def _open_session(http: httpx2.AsyncClient, url: str) -> str:
    answer = await http.post(url, json=INITIALIZE, headers=HEADERS)
    assert answer.status_code == 200, answer.text
    session: str = answer.headers[SESSION]
    return session


def _in_session(session: str) -> dict[str, str]:
    return {**HEADERS, SESSION: session, "MCP-Protocol-Version": "2025-11-25"}


async def test_start_lines_say_where_and_warn_beyond_loopback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="mcp_jobs.server.http")
    async with running(_settings(host="127.0.0.1")) as listening:
        assert listening.url.startswith("http://127.0.0.1:")
    started = [r for r in caplog.records if r.name == "mcp_jobs.server.http"]
    assert [r.levelno for r in started] == [logging.INFO]
    assert started[0].getMessage().startswith(f"serving MCP at {listening.url} (bearer token")
    caplog.clear()

    async with running(_settings(host="0.0.0.0", token=LONG_TOKEN)):
        pass
    warned = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 1
    assert "listening on 0.0.0.0, beyond loopback" in warned[0].getMessage()
    assert LONG_TOKEN not in caplog.text


async def test_refused_requests_are_logged_without_the_token(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    wrong = "Bearer guess-" + TOKEN[:6]
    attempts = [({}, "missing"), ({"Authorization": "Basic dXNlcjpwdw=="}, "malformed")]
    attempts += [({"Authorization": "Bearer"}, "malformed"), ({"Authorization": wrong}, "wrong")]
    async with running(_settings()) as listening, httpx2.AsyncClient() as http:
        for extra, _ in attempts:
            answer = await http.post(listening.url, json=INITIALIZE, headers={**HEADERS, **extra})
            assert answer.status_code == 401
        authorized = {**HEADERS, "Authorization": f"Bearer {TOKEN}"}
        assert (await http.post(listening.url, json=INITIALIZE, headers=authorized)).is_success
    refused = [r for r in caplog.records if r.getMessage().startswith("refused ")]
    assert [r.levelno for r in refused] == [logging.WARNING] * len(attempts)
    for record, (_, reason) in zip(refused, attempts, strict=True):
        auth: dict[str, str] = record.auth  # type: ignore[attr-defined]
        assert auth["reason"] == reason
        assert auth["path"] == "/mcp"
        assert auth["remote"].startswith("127.0.0.1:")
        assert record.getMessage().startswith(f"refused POST /mcp from {auth['remote']}: {reason}")
    assert TOKEN[:6] not in caplog.text
    assert "dXNlcjpwdw" not in caplog.text


def test_refusal_reasons() -> None:
    assert refusal_reason(None) == "missing"
    assert refusal_reason("  ") == "missing"
    assert refusal_reason("Token abc") == "malformed"
    assert refusal_reason("Bearer   ") == "malformed"
    assert refusal_reason("bearer abc") == "wrong"


async def test_idle_sessions_are_closed_and_their_ids_answer_404() -> None:
    probes = 16
    watch = Watch(lambda records: sum("idle timeout" in r.getMessage() for r in records) >= probes)
    manager_log = logging.getLogger("mcp.server.streamable_http_manager")
    manager_log.addHandler(watch)
    level = manager_log.level
    manager_log.setLevel(logging.INFO)
    authorized = httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"})
    try:
        # A tiny idle period, and a wait on the manager's own "idle timeout" lines.
        async with running(_settings(session_idle_seconds=0.05)) as listening, authorized:
            sessions = [await _open_session(authorized, listening.url) for _ in range(probes)]
            with anyio.fail_after(10):
                await watch.event.wait()
            for session in sessions:
                gone = await authorized.post(
                    listening.url, json=LIST_TOOLS, headers=_in_session(session)
                )
                assert gone.status_code == 404, gone.text
            # A client that comes back starts a new session and is served.
            fresh = await _open_session(authorized, listening.url)
            again = await authorized.post(
                listening.url, json=LIST_TOOLS, headers=_in_session(fresh)
            )
            assert again.status_code == 200
    finally:
        manager_log.removeHandler(watch)
        manager_log.setLevel(level)


async def test_sessions_over_the_bound_are_refused_with_503_when_none_is_idle() -> None:
    authorized = httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"})
    async with (
        running(_settings(max_sessions=2)) as listening,
        authorized,
        AsyncExitStack() as held,
    ):
        first = await _open_session(authorized, listening.url)
        second = await _open_session(authorized, listening.url)
        # An open GET stream keeps a session busy: none idle to close for room (http_sessions).
        for session in (first, second):
            listen = {**_in_session(session), "Accept": "text/event-stream"}
            opened = await held.enter_async_context(
                authorized.stream("GET", listening.url, headers=listen)
            )
            assert opened.status_code == 200
        over = await authorized.post(listening.url, json=INITIALIZE, headers=HEADERS)
        assert over.status_code == 503
        assert over.json()["error"]["code"] == SERVER_BUSY
        # The live sessions are unaffected, and ending one makes room.
        still = await authorized.post(listening.url, json=LIST_TOOLS, headers=_in_session(first))
        assert still.status_code == 200
        ended = await authorized.delete(listening.url, headers=_in_session(first))
        assert ended.status_code == 200
        await _open_session(authorized, listening.url)


def test_a_bracketed_ipv6_host_is_bound_without_brackets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MCP_JOBS_TOKEN_FILE", raising=False)
    assert http_settings(Settings(host="[::1]")).host == "::1"


async def test_a_request_whose_id_is_no_string_or_integer_is_answered() -> None:
    """MCP: a request's id is a string or an integer. The SDK's transport read one whose id is
    null, a fraction or an object as a notification (202, no answer): its sender waited. It is
    answered -32600, as on stdio; without a token it is still 401 first."""
    authorized = httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"})
    async with running(_settings(host="127.0.0.1")) as listening, authorized as http:
        session = await _open_session(http, listening.url)
        for ident in ({"a": 1}, None, 1.5, True, [1]):
            message = {"jsonrpc": "2.0", "id": ident, "method": "tools/list"}
            answer = await http.post(listening.url, json=message, headers=_in_session(session))
            assert answer.status_code == 400, (ident, answer.status_code, answer.text)
            assert answer.json() == {
                "jsonrpc": "2.0",
                "id": None,
                "error": {"code": -32600, "message": INVALID_ID},
            }
        message = {"jsonrpc": "2.0", "id": None, "method": "tools/list"}
        async with httpx2.AsyncClient() as anonymous:
            answer = await anonymous.post(listening.url, json=message, headers=_in_session(session))
            assert answer.status_code == 401
        listed = {"jsonrpc": "2.0", "id": 7, "method": "tools/list"}
        answer = await http.post(listening.url, json=listed, headers=_in_session(session))
        assert answer.status_code == 200 and '"id":7' in answer.text.replace(" ", "")
        told = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert (
            await http.post(listening.url, json=told, headers=_in_session(session))
        ).status_code == 202


async def test_a_host_a_proxy_forwards_is_answered_once_allowed() -> None:
    # A TLS proxy on this machine forwards the Host it was reached by: a loopback server
    # refused every request (421) until --allowed-host; other names stay refused.
    proxied = {**HEADERS, "Authorization": f"Bearer {TOKEN}", "Host": "jobs.example.com"}
    origin = {**proxied, "Origin": "https://jobs.example.com"}
    async with running(_settings()) as listening, httpx2.AsyncClient() as http:
        refused = await http.post(listening.url, json=INITIALIZE, headers=proxied)
        # The guard's bare "Invalid Host header", said with the setting that admits the name.
        assert refused.status_code == 421
        assert "--allowed-host jobs.example.com" in refused.text
        assert "MCP_JOBS_ALLOWED_HOSTS" in refused.text
        authorized = {**HEADERS, "Authorization": f"Bearer {TOKEN}"}
        cross_origin = {**authorized, "Origin": "https://app.example"}
        crossed = await http.post(listening.url, json=INITIALIZE, headers=cross_origin)
        # A page's Origin is not what --allowed-host is for (test_http_hosts.py).
        assert crossed.status_code == 403 and "--allowed-host app.example" not in crossed.text
        assert int(crossed.headers["content-length"]) == len(crossed.content)
    allowed = _settings(allowed_hosts=("jobs.example.com",))
    async with running(allowed) as listening, httpx2.AsyncClient() as http:
        for headers in (proxied, origin, {**proxied, "Host": "jobs.example.com:443"}):
            answer = await http.post(listening.url, json=INITIALIZE, headers=headers)
            assert answer.status_code == 200, answer.text
        local = {**HEADERS, "Authorization": f"Bearer {TOKEN}"}
        assert (await http.post(listening.url, json=INITIALIZE, headers=local)).status_code == 200
        evil = {**proxied, "Host": "evil.example.com"}
        assert (await http.post(listening.url, json=INITIALIZE, headers=evil)).status_code == 421
        bad_origin = {**proxied, "Origin": "https://evil.example.com"}
        assert (
            await http.post(listening.url, json=INITIALIZE, headers=bad_origin)
        ).status_code == 403


def test_allowed_hosts_come_from_the_flag_else_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MCP_JOBS_ALLOWED_HOSTS", "Jobs.Example.com, ,10.0.0.5,")
    assert http_settings(Settings(token=TOKEN)).allowed_hosts == ("jobs.example.com", "10.0.0.5")
    flagged = http_settings(Settings(token=TOKEN), allowed_hosts=["a.example"])
    assert flagged.allowed_hosts == ("a.example",)
    # The standalone dashboard on loopback checks Host against the same names.
    hosts = standalone_auth(flagged).hosts
    assert hosts is not None and "a.example" in hosts and "jobs.example.com" not in hosts
    parsed = build_parser().parse_args(
        ["serve", "--allowed-host", "a.example", "--allowed-host", "b.example"]
    )
    assert parsed.allowed_host == ["a.example", "b.example"]
    with pytest.raises(HttpSettingInvalidError) as from_flag:
        http_settings(Settings(token=TOKEN), allowed_hosts=["https://jobs.example.com:443/"])
    assert from_flag.value.fix.endswith("--allowed-host jobs.example.com")
    assert not from_flag.value.retryable
    monkeypatch.setenv("MCP_JOBS_ALLOWED_HOSTS", "jobs example")
    with pytest.raises(HttpSettingInvalidError) as from_env:
        http_settings(Settings(token=TOKEN))
    assert from_env.value.fix == "export MCP_JOBS_ALLOWED_HOSTS=jobsexample"
