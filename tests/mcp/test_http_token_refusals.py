"""A refused bearer token as its client meets it: 401 whose RFC 6750 `error_description` names
the check that failed (never the expected secret) and whose JSON-RPC body carries the typed
refusal (code, cause, fix); the JWT leeway covers the expiry too; an issuer that differs from its
metadata's by a trailing slash is the metadata's."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import httpx2
import jwt
import pytest

from mcp_jobs.cli.parser import build_parser
from mcp_jobs.config import OAuthSettings, Settings
from mcp_jobs.errors import OAuthDiscoveryError
from mcp_jobs.server.oauth import discover
from tests.mcp.http_support import bearer, refusal, running
from tests.mcp.oauth_issuer import AUDIENCE, Issuer, issuer
from tests.mcp.support import INITIALIZE
from tests.support.fix_lines import command_words

TOKEN = "a-loopback-token-that-is-secret"
METADATA = "/.well-known/oauth-authorization-server"
# RFC 6750 §3: the characters an error_description may hold.
DESCRIPTION = re.compile(r"[\x20\x21\x23-\x5b\x5d-\x7e]+")


@pytest.fixture
def idp() -> Iterator[Issuer]:
    with issuer() as made:
        yield made


def _oauth(idp: Issuer, issuer_url: str | None = None, **overrides: Any) -> Settings:
    oauth = OAuthSettings(issuer=issuer_url or idp.url, resource_url=AUDIENCE, audience=AUDIENCE)
    return Settings(**{"port": 0, "oauth": oauth, **overrides})


def _challenge(answer: httpx2.Response) -> dict[str, str]:
    """The WWW-Authenticate header's parameters."""
    header = answer.headers["www-authenticate"]
    assert header.startswith("Bearer ")
    return dict(re.findall(r'(\w+)="([^"]*)"', header))


def _refused(answer: httpx2.Response, check: str) -> tuple[str, dict[str, Any]]:
    """The error_description and the typed refusal of a 401 for `check`."""
    said = refusal(answer, 401)
    challenge = _challenge(answer)
    assert challenge["error"] == "invalid_token"
    description = challenge["error_description"]
    assert DESCRIPTION.fullmatch(description), description
    data: dict[str, Any] = said["error"]["data"]
    assert data["code"] == "HTTP_TOKEN_REFUSED" and data["retryable"] is False
    assert data["details"]["check"] == check, (check, data)
    assert data["cause"] and data["fix"]
    return description, data


async def test_each_failed_check_is_named(idp: Issuer) -> None:
    other_key = Issuer(idp.url)
    unknown_kid = jwt.encode(
        {"iss": idp.url, "aud": AUDIENCE, "exp": 2**40, "scope": "jobs:read"},
        idp.key,
        algorithm="RS256",
        headers={"kid": "no-such-key"},
    )
    tokens = {
        "expired": (idp.token(expires_in=-3600), "expired"),
        "not_yet_valid": (idp.token(nbf=2**40), "not yet valid"),
        "audience": (idp.token(audience="https://other.example/mcp"), "audience"),
        "issuer": (idp.token(issuer="https://elsewhere.example"), "issuer"),
        "signature": (idp.token(key=other_key.key), "signature"),
        "unknown_key": (unknown_kid, "key"),
        "not_a_jwt": ("not.a.jwt", "JWT"),
    }
    async with running(_oauth(idp)) as listening, httpx2.AsyncClient() as http:
        for check, (token, named) in tokens.items():
            answer = await http.post(listening.url, json=INITIALIZE, headers=bearer(token))
            description, _ = _refused(answer, check)
            assert named in description, (check, description)
            assert token not in answer.text
            # Where the client learns what this server takes, as before.
            assert "resource_metadata" in _challenge(answer)
        missing = {"Accept": bearer("x")["Accept"], "Content-Type": "application/json"}
        description, _ = _refused(
            await http.post(listening.url, json=INITIALIZE, headers=missing), "missing"
        )
        assert "no bearer token" in description
        basic = {**missing, "Authorization": "Basic dXNlcjpwdw=="}
        _refused(await http.post(listening.url, json=INITIALIZE, headers=basic), "not_bearer")


async def test_a_wrong_static_token_is_named_without_the_right_one() -> None:
    async with (
        running(Settings(port=0, token=TOKEN)) as listening,
        httpx2.AsyncClient() as http,
    ):
        wrong = TOKEN[:-1] + "X"
        answer = await http.post(listening.url, json=INITIALIZE, headers=bearer(wrong))
        description, _ = _refused(answer, "wrong_token")
        assert "not this server's token" in description
        assert TOKEN not in answer.text and TOKEN[:8] not in answer.text
        missing = {k: v for k, v in bearer(TOKEN).items() if k != "Authorization"}
        _refused(await http.post(listening.url, json=INITIALIZE, headers=missing), "missing")
        assert (
            await http.post(listening.url, json=INITIALIZE, headers=bearer(TOKEN))
        ).status_code == 200


async def test_the_leeway_covers_the_expiry_the_transport_checks(idp: Issuer) -> None:
    async with running(_oauth(idp)) as listening, httpx2.AsyncClient() as http:
        # 20 s past exp: within the 30 s allowed for clocks that disagree.
        late = await http.post(
            listening.url, json=INITIALIZE, headers=bearer(idp.token(expires_in=-20))
        )
        assert late.status_code == 200, late.text
        gone = await http.post(
            listening.url, json=INITIALIZE, headers=bearer(idp.token(expires_in=-90))
        )
        description, _ = _refused(gone, "expired")
        assert "expired" in description


async def test_a_token_without_the_read_scope_is_typed(idp: Issuer) -> None:
    async with running(_oauth(idp)) as listening, httpx2.AsyncClient() as http:
        answer = await http.post(
            listening.url, json=INITIALIZE, headers=bearer(idp.token("jobs:write"))
        )
        said = refusal(answer, 403)
        assert _challenge(answer)["error"] == "insufficient_scope"
        data = said["error"]["data"]
        assert data["code"] == "SCOPE_MISSING"
        assert data["details"]["needed"] == "jobs:read"
        assert data["details"]["granted"] == ["jobs:write"]


# --- the issuer's trailing slash ----------------------------------------------------------------


async def test_an_issuer_differing_by_a_trailing_slash_is_the_metadatas(idp: Issuer) -> None:
    found = await discover(_oauth(idp, idp.url + "/"))
    assert found.oauth is not None and found.oauth.issuer == idp.url
    assert found.oauth.jwks_url == f"{idp.url}/jwks.json"
    # Served so, it takes the tokens the issuer signs (their `iss` is the metadata's).
    async with running(_oauth(idp, idp.url + "/")) as listening, httpx2.AsyncClient() as http:
        answer = await http.post(listening.url, json=INITIALIZE, headers=bearer(idp.token()))
        assert answer.status_code == 200, answer.text
    # The other way round too.
    metadata = idp.documents[METADATA]
    idp.documents[METADATA] = {**metadata, "issuer": idp.url + "/"}
    found = await discover(_oauth(idp))
    assert found.oauth is not None and found.oauth.issuer == idp.url + "/"


async def test_metadata_naming_another_issuer_is_refused_with_the_line_that_names_it(
    idp: Issuer,
) -> None:
    metadata = idp.documents[METADATA]
    idp.documents[METADATA] = {**metadata, "issuer": "https://login.example.com/realm"}
    settings = _oauth(idp, max_sessions=9, tenant="acme")
    with pytest.raises(OAuthDiscoveryError) as refused:
        await discover(settings)
    assert "names issuer 'https://login.example.com/realm'" in refused.value.cause
    words = command_words(refused.value.fix)
    assert words[0].endswith("mcp-jobs") and words[1] == "serve"
    args = build_parser().parse_args(words[1:])
    assert args.oauth_issuer == "https://login.example.com/realm"
    assert (args.transport, args.max_sessions, args.tenant) == ("http", 9, "acme")
    # The rest as it was given: the resource URL, the audience it defaults.
    assert (args.oauth_resource_url, args.oauth_audience) == (AUDIENCE, None)
