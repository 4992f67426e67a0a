"""OAuth 2.1 resource server: JWT access tokens checked against the issuer's JWKS.

At start the JWKS URL is found in the issuer's metadata (RFC 8414, else OpenID discovery) and
the keys are read once, so a wrong issuer is a typed error before anything listens. Each token
is checked for its signature (allowed algorithms only), `iss`, `aud`, `exp` and `nbf` (with
`LEEWAY_SECONDS`), and its tenant claim; what it grants is `oauth_grants`. A refused token
answers 401 (the SDK's middleware) naming the check that failed (`token_refusals`); PyJWT's own
words are logged, never the token. The protected-resource metadata (RFC 9728) names the issuer
and the scopes.
"""

from __future__ import annotations

import json
import logging
from dataclasses import replace
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import anyio.to_thread
import httpx2
from mcp.server.auth.routes import build_resource_metadata_url
from mcp.server.auth.settings import AuthSettings
from mcp.shared.auth import ProtectedResourceMetadata
from pydantic import AnyHttpUrl
from starlette.types import ASGIApp, Receive, Scope, Send

from mcp_jobs.config import OAuthSettings, Settings
from mcp_jobs.errors import OAuthDiscoveryError, OAuthUnavailableError
from mcp_jobs.server.oauth_grants import READ, SCOPES, OAuthAccessToken
from mcp_jobs.server.serve_line import serve_line
from mcp_jobs.server.token_refusals import (
    ALGORITHM,
    AUDIENCE,
    CLAIM,
    EXPIRED,
    INVALID,
    ISSUER,
    KEYS_UNREADABLE,
    NOT_A_JWT,
    NOT_YET_VALID,
    SIGNATURE,
    TENANT,
    UNKNOWN_KEY,
    TokenRefusal,
    note_refusal,
)

try:
    import jwt
except ImportError as exc:  # the `oauth` extra
    raise OAuthUnavailableError() from exc

logger = logging.getLogger("mcp_jobs.server.http")

# Clocks of the issuer and this host disagree by a few seconds; a minute is the usual allowance.
LEEWAY_SECONDS = 30
DISCOVERY_TIMEOUT_SECONDS = 10.0
METADATA_PATH = "/.well-known/oauth-protected-resource"


class JwtVerifier:
    """The SDK's TokenVerifier for JWT access tokens. `refused` receives why a token was not
    accepted (for the refusal log line)."""

    def __init__(self, oauth: OAuthSettings, pinned_tenant: str | None) -> None:
        assert oauth.jwks_url is not None, "discover() fills jwks_url before serving"
        self._oauth = oauth
        self._pinned = pinned_tenant
        # Caches the key set 5 minutes; an unknown `kid` refetches at most every 30 seconds.
        self._keys = jwt.PyJWKClient(oauth.jwks_url, timeout=DISCOVERY_TIMEOUT_SECONDS)

    async def verify_token(self, token: str) -> OAuthAccessToken | None:
        try:
            return await self._verify(token)
        except (jwt.PyJWTError, InvalidClaimError) as exc:
            note_refusal(self._refusal(exc))
            return None

    async def _verify(self, token: str) -> OAuthAccessToken:
        # The key fetch is blocking urllib: off the event loop.
        key = await anyio.to_thread.run_sync(self._keys.get_signing_key_from_jwt, token)
        claims: dict[str, Any] = jwt.decode(
            token,
            key,
            algorithms=list(self._oauth.algorithms),
            audience=self._oauth.audience,
            issuer=self._oauth.issuer,
            leeway=LEEWAY_SECONDS,
            options={"require": ["exp", "iss", "aud"]},
        )
        tenant = claims.get(self._oauth.tenant_claim)
        if tenant is not None and (not isinstance(tenant, str) or not tenant):
            raise InvalidClaimError(f"claim {self._oauth.tenant_claim!r} is not a tenant id")
        if self._pinned is not None and tenant is not None and tenant != self._pinned:
            raise InvalidClaimError("the token's tenant is not this server's --tenant")
        subject = claims.get("sub")
        client = claims.get("client_id") or claims.get("azp") or subject or "unknown"
        return OAuthAccessToken(
            token=token,
            client_id=str(client),
            scopes=_scopes(claims),
            # The SDK refuses a token past `expires_at` itself: the leeway PyJWT allowed, too.
            expires_at=int(claims["exp"]) + LEEWAY_SECONDS,
            subject=str(subject) if subject is not None else None,
            claims={"iss": claims["iss"]},
            tenant=tenant,
        )

    def _refusal(self, exc: Exception) -> TokenRefusal:
        """What the client is told of `exc`: the check, with what this server expected (the
        issuer and audience are public: its metadata names them)."""
        check, said = next(
            ((check, said) for kind, check, said in _CHECKS if isinstance(exc, kind)),
            (INVALID, "the access token was refused"),
        )
        if check == AUDIENCE:
            said = f"the token's audience (aud) is not {self._oauth.audience}"
        elif check == ISSUER:
            said = f"the token's issuer (iss) is not {self._oauth.issuer}"
        elif check == ALGORITHM:
            said += f" (this server takes {', '.join(self._oauth.algorithms)})"
        elif isinstance(exc, jwt.MissingRequiredClaimError):
            said = f"the token has no {exc.claim!r} claim"
        elif isinstance(exc, InvalidClaimError):
            said = str(exc)
        return TokenRefusal(check, said, _why(exc))


class InvalidClaimError(Exception):
    """A claim PyJWT does not know of is unusable."""


# PyJWT's refusals, most specific first (InvalidSignatureError is a DecodeError), by the check
# the client is told failed; each `said` names no part of the token.
_CHECKS: tuple[tuple[type[Exception], str, str], ...] = (
    (jwt.ExpiredSignatureError, EXPIRED, "the token expired (exp is past, beyond the leeway)"),
    (jwt.ImmatureSignatureError, NOT_YET_VALID, "the token is not yet valid (nbf)"),
    (jwt.InvalidIssuedAtError, NOT_YET_VALID, "the token is not yet valid (iat)"),
    (jwt.InvalidAudienceError, AUDIENCE, "the token's aud is not this server's audience"),
    (jwt.InvalidIssuerError, ISSUER, "the token's iss is not this server's issuer"),
    (jwt.InvalidSignatureError, SIGNATURE, "the token's signature does not verify"),
    (jwt.InvalidAlgorithmError, ALGORITHM, "the token's signing algorithm is not allowed"),
    (jwt.MissingRequiredClaimError, CLAIM, "the token lacks a required claim"),
    (jwt.PyJWKClientConnectionError, KEYS_UNREADABLE, "the issuer's key set could not be read"),
    (jwt.PyJWKClientError, UNKNOWN_KEY, "the token's kid names no key the issuer publishes"),
    (jwt.DecodeError, NOT_A_JWT, "the token is not a JWT"),
    (InvalidClaimError, TENANT, "the token's tenant claim is refused"),
)


def _why(exc: Exception) -> str:
    # PyJWT's messages name the failed check (expired, audience, issuer, signature, kid), never
    # the token; a key-set fetch error names the JWKS URL.
    return f"{type(exc).__name__}: {exc}"


def _scopes(claims: dict[str, Any]) -> list[str]:
    """RFC 9068 `scope` (space-separated), or the `scp` list some issuers write."""
    scope = claims.get("scope")
    if isinstance(scope, str):
        return scope.split()
    scp = claims.get("scp")
    if isinstance(scp, list):
        return [s for s in scp if isinstance(s, str)]
    if isinstance(scp, str):
        return scp.split()
    return []


# --- settings and start ------------------------------------------------------------------------


def oauth_auth(settings: Settings) -> dict[str, Any]:
    """The `MCPServer` keyword arguments that make it an OAuth resource server: every request
    needs a token with `jobs:read` (403 `insufficient_scope` otherwise)."""
    oauth = settings.oauth
    assert oauth is not None
    return {
        "token_verifier": JwtVerifier(oauth, settings.tenant),
        # Validated from strings: the models keep a path-less issuer exactly as given (no
        # trailing slash), which RFC 8414's exact issuer comparison needs.
        "auth": AuthSettings.model_validate(
            {
                "issuer_url": oauth.issuer,
                "resource_server_url": oauth.resource_url,
                "required_scopes": [READ],
                # The audience is checked by JwtVerifier (`aud`), not by the SDK's resource match.
                "validate_token_resource": False,
            }
        ),
    }


def metadata_urls(issuer: str) -> list[str]:
    """Where the issuer's metadata may be: RFC 8414 (path inserted), then OpenID (appended)."""
    parts = urlsplit(issuer)
    path = parts.path.rstrip("/")
    return [
        urlunsplit(parts._replace(path=f"/.well-known/oauth-authorization-server{path}")),
        urlunsplit(parts._replace(path=f"{path}/.well-known/openid-configuration")),
    ]


async def discover(settings: Settings) -> Settings:
    """`settings` with the JWKS URL found (unless given) and the key set read once; the issuer
    spelled as its metadata spells it, when the two differ only by a trailing slash."""
    oauth = settings.oauth
    assert oauth is not None
    async with httpx2.AsyncClient(timeout=DISCOVERY_TIMEOUT_SECONDS) as http:
        if oauth.jwks_url is None:
            oauth = await _from_metadata(http, settings, oauth)
        assert oauth.jwks_url is not None
        keys = await _get_json(http, oauth.jwks_url)
        if not isinstance(keys.get("keys"), list) or not keys["keys"]:
            raise OAuthDiscoveryError(oauth.jwks_url, "it is not a JSON Web Key Set with keys")
    return replace(settings, oauth=oauth)


async def _from_metadata(
    http: httpx2.AsyncClient, settings: Settings, oauth: OAuthSettings
) -> OAuthSettings:
    """`oauth` with the issuer and JWKS URL its metadata names."""
    issuer = oauth.issuer
    tried: list[str] = []
    for url in metadata_urls(issuer):
        try:
            metadata = await _get_json(http, url)
        except OAuthDiscoveryError as exc:
            tried.append(f"{url}: {exc.reason}" if tried else exc.reason)
            continue
        found = metadata.get("issuer")
        # RFC 8414 §3.3: metadata for another issuer must not be used. A trailing slash names
        # no other server, and tokens carry the issuer as its metadata spells it.
        if isinstance(found, str) and found != issuer and found.rstrip("/") == issuer.rstrip("/"):
            issuer = found
        if found != issuer:
            refused = OAuthDiscoveryError(url, f"it names issuer {found!r}, not {issuer!r}")
            if isinstance(found, str) and found:
                named = replace(settings, oauth=replace(oauth, issuer=found))
                refused.fix = serve_line(named, face="cli")
            raise refused
        jwks_uri = metadata.get("jwks_uri")
        if not isinstance(jwks_uri, str) or urlsplit(jwks_uri).scheme not in ("http", "https"):
            raise OAuthDiscoveryError(url, "it has no jwks_uri; pass --oauth-jwks-url")
        return replace(oauth, issuer=issuer, jwks_url=jwks_uri)
    raise OAuthDiscoveryError(metadata_urls(issuer)[0], "; ".join(tried))


async def _get_json(http: httpx2.AsyncClient, url: str) -> dict[str, Any]:
    try:
        answer = await http.get(url, headers={"Accept": "application/json"})
        answer.raise_for_status()
        document = answer.json()
    except (httpx2.HTTPError, json.JSONDecodeError, ValueError) as exc:
        raise OAuthDiscoveryError(url, str(exc) or type(exc).__name__) from exc
    if not isinstance(document, dict):
        raise OAuthDiscoveryError(url, "the answer is not a JSON object")
    return document


# --- RFC 9728 metadata -------------------------------------------------------------------------


class ProtectedResourceMetadataApp:
    """Answers GET on `/.well-known/oauth-protected-resource` and its RFC 9728 form with the
    resource path appended, naming the issuer and every scope this server knows; everything
    else goes to `app`. (The SDK's own route lists only the scopes every request needs.)"""

    def __init__(self, app: ASGIApp, oauth: OAuthSettings) -> None:
        self.app = app
        metadata = ProtectedResourceMetadata.model_validate(
            {
                "resource": oauth.resource_url,
                "authorization_servers": [oauth.issuer],
                "scopes_supported": list(SCOPES),
                "resource_name": "mcp-jobs",
            }
        )
        self._body = metadata.model_dump_json(exclude_none=True).encode()
        suffixed = urlsplit(str(build_resource_metadata_url(AnyHttpUrl(oauth.resource_url))))
        self._paths = {METADATA_PATH, suffixed.path}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("path") not in self._paths:
            await self.app(scope, receive, send)
            return
        if scope.get("method") != "GET":
            await _answer(send, 405, b"", [(b"allow", b"GET")])
            return
        headers = [
            (b"content-type", b"application/json"),
            (b"cache-control", b"public, max-age=3600"),
            (b"access-control-allow-origin", b"*"),
        ]
        await _answer(send, 200, self._body, headers)


async def _answer(send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]]) -> None:
    headers = [*headers, (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
