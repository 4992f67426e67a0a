"""OAuth 2.1 resource server over real streamable HTTP: JWT access tokens from a local
authorization server (`oauth_issuer`), checked for signature, issuer, audience, expiry and
algorithm; scopes gate the tools; a tenant claim pins the session; RFC 9728 metadata."""

from __future__ import annotations

import logging
import shlex
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import httpx2
import jwt
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from engine import JobRegistry, Jobs, connect
from mcp_jobs.cli.entry import main
from mcp_jobs.config import OAuthSettings, Settings, http_settings, read_oauth
from mcp_jobs.errors import OAuthConflictError, OAuthDiscoveryError, OAuthSettingInvalidError
from mcp_jobs.server import build_server
from mcp_jobs.server.http_serve import Listening, serve_http
from mcp_jobs.server.oauth import discover, metadata_urls
from mcp_jobs.server.oauth_grants import needed_scopes
from tests.mcp.oauth_issuer import AUDIENCE, Issuer, issuer
from tests.mcp.support import INITIALIZE, Caller, declare_app
from tests.support.fix_lines import command_words

HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
WRITER = "jobs:read jobs:write"


@pytest.fixture
def idp() -> Iterator[Issuer]:
    with issuer() as made:
        yield made


def _settings(idp: Issuer, **overrides: Any) -> Settings:
    oauth = OAuthSettings(issuer=idp.url, resource_url=AUDIENCE, audience=AUDIENCE)
    return Settings(**{"port": 0, "oauth": oauth, **overrides})


@asynccontextmanager
async def running(settings: Settings) -> AsyncIterator[tuple[Listening, Jobs]]:
    registry = JobRegistry()
    declare_app(registry)
    jobs = await connect("memory://", registry=registry)
    settings = await discover(settings)
    try:
        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                server = build_server(settings, jobs, http=True)
                listening: Listening = await tg.start(serve_http, server, settings)
                try:
                    yield listening, jobs
                finally:
                    listening.stop()
    finally:
        await jobs.close()


@asynccontextmanager
async def session(url: str, token: str, mode: str) -> AsyncIterator[Caller]:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"})
    async with http, Client(streamable_http_client(url, http_client=http), mode=mode) as client:
        caller = Caller(client)
        await caller.load()
        yield caller


# --- a live server ------------------------------------------------------------------------------


async def test_a_valid_token_works(idp: Issuer, mode: str) -> None:
    async with running(_settings(idp)) as (listening, jobs):
        async with session(listening.url, idp.token(WRITER), mode) as mcp:
            made = await mcp.ok("enqueue_job", {"name": "greet", "input": {"user_id": 1}})
            listed = await mcp.ok("list_jobs", {})
        assert [j["id"] for j in listed["jobs"]] == [made["job_id"]]
        assert len((await jobs.list()).jobs) == 1


async def test_bad_tokens_answer_401_and_are_logged_without_the_token(
    idp: Issuer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    other_key = Issuer(idp.url)
    hs256 = jwt.encode(
        {"iss": idp.url, "aud": AUDIENCE, "exp": 2**40, "scope": "jobs:read"},
        "a-shared-secret-of-32-bytes-long!",
        algorithm="HS256",
        headers={"kid": idp.kid},
    )
    refused = {
        "wrong issuer": idp.token(WRITER, issuer="https://elsewhere.example"),
        "wrong audience": idp.token(WRITER, audience="https://other.example/mcp"),
        "expired": idp.token(WRITER, expires_in=-3600),
        "not yet valid": idp.token(WRITER, nbf=2**40),
        "bad signature": idp.token(WRITER, key=other_key.key),
        "HS256": hs256,
        "garbage": "not.a.jwt",
    }
    async with running(_settings(idp)) as (listening, jobs), httpx2.AsyncClient() as http:
        for why, token in refused.items():
            headers = {**HEADERS, "Authorization": f"Bearer {token}"}
            answer = await http.post(listening.url, json=INITIALIZE, headers=headers)
            assert answer.status_code == 401, why
            assert 'error="invalid_token"' in answer.headers["www-authenticate"]
        assert (await jobs.list()).jobs == []
    lines = [r for r in caplog.records if r.getMessage().startswith("refused ")]
    details = [r.auth["detail"] for r in lines]  # type: ignore[attr-defined]
    assert len(details) == len(refused)
    for needle in ("issuer", "audience", "expired", "not yet valid", "Signature verification"):
        assert any(needle.lower() in d.lower() for d in details), (needle, details)
    for token in refused.values():
        assert token not in caplog.text


async def test_scopes_gate_the_tools(idp: Issuer, mode: str) -> None:
    async with running(_settings(idp)) as (listening, jobs):
        async with session(listening.url, idp.token("jobs:read"), mode) as mcp:
            # tools/list shows what this token may call: no tool that only writes.
            assert not {"enqueue_job", "retry_job", "cancel_job"} & set(mcp.schemas)
            assert {"describe_jobs", "run_backfill", "prune_history"} <= set(mcp.schemas)
            await mcp.ok("describe_jobs")
            called = await mcp.client.call_tool("enqueue_job", {"name": "greet", "input": {}})
            assert called.is_error and called.structured_content is not None
            refused = called.structured_content["error"]
            assert (refused["code"], refused["details"]["needed"]) == (
                "SCOPE_MISSING",
                "jobs:write",
            )
            await mcp.ok("prune_history", {})  # a dry run reads
            refused = await mcp.fails("prune_history", {"write": True}, "SCOPE_MISSING")
            assert refused["details"]["needed"] == "admin"
        assert (await jobs.list()).jobs == []

        async with session(listening.url, idp.token(WRITER), mode) as mcp:
            assert {"enqueue_job", "retry_job", "cancel_job"} <= set(mcp.schemas)
            refused = await mcp.fails(
                "run_backfill", {"name": "anything", "write": True}, "SCOPE_MISSING"
            )
            assert refused["details"] == {
                "tool": "run_backfill",
                "needed": "backfills:write",
                "granted": ["jobs:read", "jobs:write"],
            }

        # Without jobs:read nothing is served: 403 insufficient_scope, as the SDK words it.
        async with httpx2.AsyncClient() as http:
            headers = {**HEADERS, "Authorization": f"Bearer {idp.token('jobs:write')}"}
            answer = await http.post(listening.url, json=INITIALIZE, headers=headers)
        assert answer.status_code == 403
        assert 'error="insufficient_scope"' in answer.headers["www-authenticate"]


def test_the_scope_each_call_needs() -> None:
    assert needed_scopes("list_jobs", mutating=False) == ("jobs:read",)
    assert needed_scopes("run_backfill", mutating=False) == ("jobs:read",)
    assert needed_scopes("cancel_job", mutating=True) == ("jobs:read", "jobs:write")
    assert needed_scopes("run_backfill", mutating=True) == ("jobs:read", "backfills:write")
    assert needed_scopes("prune_history", mutating=True) == ("jobs:read", "admin")


async def test_a_tenant_claim_pins_the_session(idp: Issuer, mode: str) -> None:
    async with running(_settings(idp)) as (listening, jobs):
        theirs = await jobs.enqueue("receipt", {"order_id": 1}, tenant_id="b")
        token = idp.token(WRITER, tenant="a")
        async with session(listening.url, token, mode) as mcp:
            await mcp.fails("inspect_job", {"job_id": theirs.id}, "JOB_NOT_FOUND")
            made = await mcp.ok("enqueue_job", {"name": "receipt", "input": {"order_id": 2}})
            assert made["tenant_id"] == "a"
            await mcp.fails(
                "enqueue_job",
                {"name": "receipt", "input": {"order_id": 3}, "tenant_id": "b"},
                "TENANT_PINNED",
            )
            listed = await mcp.ok("list_jobs", {})
        assert [j["id"] for j in listed["jobs"]] == [made["job_id"]]
        stored = await jobs.get(made["job_id"])
        assert stored is not None and stored.tenant_id == "a"


async def test_a_pinned_server_refuses_another_tenants_token(idp: Issuer) -> None:
    async with running(_settings(idp, tenant="a")) as (listening, _), httpx2.AsyncClient() as http:
        for tenant, status in (("b", 401), ("a", 200), (None, 200)):
            headers = {**HEADERS, "Authorization": f"Bearer {idp.token(tenant=tenant)}"}
            answer = await http.post(listening.url, json=INITIALIZE, headers=headers)
            assert answer.status_code == status, tenant


async def test_protected_resource_metadata(idp: Issuer) -> None:
    async with running(_settings(idp)) as (listening, _), httpx2.AsyncClient() as http:
        base = listening.url.removesuffix("/mcp")
        for path in (
            "/.well-known/oauth-protected-resource",
            "/.well-known/oauth-protected-resource/mcp",
        ):
            answer = await http.get(base + path)
            assert answer.status_code == 200, path
            assert answer.json() == {
                "resource": AUDIENCE,
                "authorization_servers": [idp.url],
                "scopes_supported": ["jobs:read", "jobs:write", "backfills:write", "admin"],
                "bearer_methods_supported": ["header"],
                "resource_name": "mcp-jobs",
            }
        bare = await http.post(listening.url, json=INITIALIZE, headers=HEADERS)
        assert bare.status_code == 401
        challenge = bare.headers["www-authenticate"]
        assert (
            'resource_metadata="https://jobs.example/.well-known/oauth-protected-resource/mcp"'
            in challenge
        )


# --- settings and discovery ---------------------------------------------------------------------


def test_oauth_settings_from_flags_and_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ISSUER", "AUDIENCE", "JWKS_URL", "RESOURCE_URL", "ALGORITHMS", "TENANT_CLAIM"):
        monkeypatch.delenv(f"MCP_JOBS_OAUTH_{name}", raising=False)
    monkeypatch.delenv("MCP_JOBS_TOKEN_FILE", raising=False)
    assert read_oauth({}, "127.0.0.1", 8765) is None
    monkeypatch.setenv("MCP_JOBS_OAUTH_ISSUER", "https://auth.example")
    got = read_oauth({}, "127.0.0.1", 8765)
    assert got == OAuthSettings(
        issuer="https://auth.example",
        resource_url="http://127.0.0.1:8765/mcp",
        audience="http://127.0.0.1:8765/mcp",
    )
    flags = {"audience": "api://jobs", "algorithms": "ES256", "tenant_claim": "org"}
    got = read_oauth(flags, "::1", 9000)
    assert got is not None
    assert (got.audience, got.algorithms, got.tenant_claim) == ("api://jobs", ("ES256",), "org")
    assert got.resource_url == "http://[::1]:9000/mcp"
    assert http_settings(Settings()).oauth == read_oauth({}, "127.0.0.1", 8765)

    for name, value in (
        ("algorithms", "HS256"),
        ("algorithms", "none"),
        ("issuer", "http://auth.example"),
    ):
        with pytest.raises(OAuthSettingInvalidError):
            read_oauth({name: value}, "127.0.0.1", 8765)

    with pytest.raises(OAuthConflictError) as conflict:
        http_settings(Settings(token="static"))
    assert conflict.value.fix == "unset MCP_JOBS_TOKEN"


@pytest.mark.parametrize(
    ("flags", "said", "mended"),
    [
        (
            ["--oauth-issuer", "http://a.example/x;touch {marker}"],
            "--oauth-issuer='http://a.example/x;touch",
            ["--oauth-issuer", "https://a.example/x;touch {marker}"],
        ),
        (
            ["--oauth-issuer", "https://a.example", "--oauth-algorithms", "XX256,ES256"],
            "--oauth-algorithms='XX256,ES256'",
            ["--oauth-algorithms", "ES256"],
        ),
        (
            ["--confirm-ttl-seconds", "-5"],
            "--confirm-ttl-seconds='-5'",
            ["--confirm-ttl-seconds", "1"],
        ),
    ],
)
def test_a_setting_a_flag_gave_is_mended_on_the_command_line(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    flags: list[str],
    said: str,
    mended: list[str],
) -> None:
    """An `export` of the variable would change nothing (the flag wins over it): the fix is
    the command with the flag set to the nearest accepted value, each word quoted."""
    for name in ("MCP_JOBS_TOKEN", "MCP_JOBS_TOKEN_FILE", "MCP_JOBS_OAUTH_ISSUER"):
        monkeypatch.delenv(name, raising=False)
    marker = tmp_path / "ran"
    flags = [f.format(marker=marker) for f in flags]
    argv = ["serve", "--transport", "http", "--port", "0", *flags, "--database-url", "memory://"]
    assert main(argv) == 1
    shown = capsys.readouterr().err
    assert said in shown
    fix = shown.split("fix:", 1)[1].strip()
    words = command_words(fix)
    assert words[:2] == ["mcp-jobs", "serve"]
    at = words.index(mended[0])
    assert words[at : at + 2] == [m.format(marker=marker) for m in mended]
    assert not marker.exists()


def test_an_oauth_url_from_the_environment_is_mended_in_one_quoted_word(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = tmp_path / "ran"
    monkeypatch.setenv("MCP_JOBS_OAUTH_ISSUER", f"http://a.example/$(touch {marker})")
    with pytest.raises(OAuthSettingInvalidError) as refused:
        read_oauth({}, "127.0.0.1", 8765)
    assert (
        refused.value.fix == f"export MCP_JOBS_OAUTH_ISSUER='https://a.example/$(touch {marker})'"
    )
    subprocess.run(["sh", "-c", refused.value.fix], check=True, timeout=30)
    assert not marker.exists()


def test_the_cli_refuses_oauth_with_a_static_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MCP_JOBS_TOKEN", "static-token")
    monkeypatch.delenv("MCP_JOBS_TOKEN_FILE", raising=False)
    url = f"sqlite:///{tmp_path}/jobs.db"
    argv = ["serve", "--transport", "http", "--port", "0", "--oauth-issuer", "https://a.example"]
    assert main([*argv, "--database-url", url]) == 1
    shown = capsys.readouterr()
    assert "OAUTH_TOKEN_CONFLICT" in shown.out + shown.err
    assert "static-token" not in shown.out + shown.err
    assert not (tmp_path / "jobs.db").exists()


async def test_discovery(idp: Issuer) -> None:
    found = await discover(_settings(idp))
    assert found.oauth is not None and found.oauth.jwks_url == f"{idp.url}/jwks.json"
    # The OpenID location when RFC 8414's is absent.
    openid = idp.documents.pop("/.well-known/oauth-authorization-server")
    idp.documents["/.well-known/openid-configuration"] = openid
    assert (await discover(_settings(idp))).oauth == found.oauth
    # Metadata naming another issuer is not used.
    idp.documents["/.well-known/openid-configuration"] = {**openid, "issuer": "https://x.example"}
    with pytest.raises(OAuthDiscoveryError, match="names issuer"):
        await discover(_settings(idp))
    del idp.documents["/.well-known/openid-configuration"]
    with pytest.raises(OAuthDiscoveryError) as missing:
        await discover(_settings(idp))
    # Read by this package's Python (slim images have no curl), the URL one quoted word.
    read = shlex.split(missing.value.fix)
    assert read[:2] == [sys.executable, "-c"]
    assert read[3:] == [f"{idp.url}/.well-known/oauth-authorization-server"]
    # A JWKS URL given skips discovery, and is read once to fail early.
    given = OAuthSettings(idp.url, AUDIENCE, AUDIENCE, jwks_url=f"{idp.url}/jwks.json")
    assert (await discover(_settings(idp, oauth=given))).oauth == given
    with pytest.raises(OAuthDiscoveryError):
        await discover(_settings(idp, oauth=replace(given, jwks_url=f"{idp.url}/nothing")))


def test_metadata_urls_insert_and_append_the_issuer_path() -> None:
    assert metadata_urls("https://a.example/realms/x") == [
        "https://a.example/.well-known/oauth-authorization-server/realms/x",
        "https://a.example/realms/x/.well-known/openid-configuration",
    ]
