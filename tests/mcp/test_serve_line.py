"""The `mcp-jobs serve` line a running HTTP server writes into a fix (a Host to allow, the issuer
its metadata names, a larger session bound): read back by the CLI, it is the same server."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcp_jobs.cli.parser import build_parser
from mcp_jobs.config import OAuthSettings, Settings, http_settings
from mcp_jobs.server.serve_line import serve_line
from tests.support.fix_lines import command_words


def _read_back(line: str) -> Settings:
    """The HTTP settings the CLI makes of `line`, as `serve_command` reads its flags."""
    args = build_parser().parse_args(command_words(line)[1:])
    assert args.transport == "http"
    given = Settings(
        database_url=args.database_url,
        apps=tuple(args.app),
        tenant=args.tenant,
        read_only=args.read_only,
        host=args.host,
        port=args.port,
    )
    flags = {n: getattr(args, f"oauth_{n}") for n in ("issuer", "audience", "jwks_url")}
    flags |= {n: getattr(args, f"oauth_{n}") for n in ("resource_url", "algorithms")}
    flags["tenant_claim"] = args.oauth_tenant_claim
    return http_settings(
        given,
        token_file=args.token_file,
        session_idle_seconds=args.session_idle_seconds,
        max_sessions=args.max_sessions,
        oauth=flags,
        allowed_hosts=args.allowed_host,
    )


def test_a_static_token_servers_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("MCP_JOBS_TOKEN", "MCP_JOBS_TOKEN_FILE", "MCP_JOBS_OAUTH_ISSUER"):
        monkeypatch.delenv(name, raising=False)
    token = tmp_path / "token"
    token.write_text("a-token\n")
    monkeypatch.chdir(tmp_path)
    served = http_settings(
        Settings(
            database_url=f"sqlite:///{tmp_path}/jobs.db",
            host="127.0.0.2",
            port=9123,
            tenant="-acme",
            read_only=True,
        ),
        token_file="token",
        session_idle_seconds=90.5,
        max_sessions=7,
        allowed_hosts=["jobs.example.com"],
    )
    line = serve_line(served)
    assert str(token) in line  # the file by its full path: the line runs from anywhere
    back = _read_back(line)
    for field in ("host", "port", "token", "session_idle_seconds", "max_sessions", "tenant"):
        assert getattr(back, field) == getattr(served, field), field
    assert (back.allowed_hosts, back.read_only, back.url) == (
        served.allowed_hosts,
        True,
        served.url,
    )
    # The port a server started on port 0 took.
    assert _read_back(serve_line(served, port=4321)).port == 4321


def test_an_oauth_servers_line(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("MCP_JOBS_TOKEN", "MCP_JOBS_TOKEN_FILE"):
        monkeypatch.delenv(name, raising=False)
    oauth = OAuthSettings(
        issuer="https://login.example.com/realm",
        resource_url="https://jobs.example.com/mcp",
        audience="api://jobs",
        algorithms=("ES256",),
        tenant_claim="org",
    )
    served = Settings(database_url="memory://", port=8800, oauth=oauth)
    back = _read_back(serve_line(served))
    assert back.oauth == oauth
    assert back.port == 8800
