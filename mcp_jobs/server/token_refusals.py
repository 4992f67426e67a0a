"""Why a request's bearer token was refused, in the words its client is told: the check that
failed (RFC 6750's `error_description`) and a typed refusal for the JSON-RPC body. The verifier
notes why it refused (`note_refusal`); the Authorization header alone says a token was missing.
Nothing said holds any part of a token, nor the static token the server expects.

The codes here are the HTTP transport's own (answered before any tool runs, never raised):
`HTTP_TOKEN_REFUSED`, with the failed check in `details.check`.
"""

from __future__ import annotations

import re
from contextvars import ContextVar
from dataclasses import dataclass

from mcp_jobs.config import Settings
from schemas.errors import ErrorPayload

TOKEN_REFUSED = "HTTP_TOKEN_REFUSED"
# Its title wherever it is answered (/mcp, the dashboard).
TOKEN_REFUSED_TITLE = "the bearer token was refused"

# The checks, as `details.check` names them.
MISSING = "missing"
NOT_BEARER = "not_bearer"
WRONG_TOKEN = "wrong_token"
EXPIRED = "expired"
NOT_YET_VALID = "not_yet_valid"
AUDIENCE = "audience"
ISSUER = "issuer"
SIGNATURE = "signature"
UNKNOWN_KEY = "unknown_key"
ALGORITHM = "algorithm"
NOT_A_JWT = "not_a_jwt"
CLAIM = "claim"
TENANT = "tenant"
KEYS_UNREADABLE = "keys_unreadable"
INVALID = "invalid"

# RFC 6750 §3: an error_description holds %x20-21 / %x23-5B / %x5D-7E only.
_NOT_IN_DESCRIPTION = re.compile(r"[^\x20\x21\x23-\x5b\x5d-\x7e]")


@dataclass(frozen=True)
class TokenRefusal:
    """One failed check: `said` is what the client is told; `logged`, the verifier's own
    words (PyJWT's), goes to the server's log alone."""

    check: str
    said: str
    logged: str = ""


# Why the verifier refused this request's token, for its 401 and its refusal log line; set per
# request by http.LogRefusedRequests.
refusal_notes: ContextVar[list[TokenRefusal] | None] = ContextVar("refusal_notes", default=None)


def note_refusal(refusal: TokenRefusal) -> None:
    """Hand `refusal` to this request's 401 and log line."""
    notes = refusal_notes.get()
    if notes is not None:
        notes.append(refusal)


def header_check(authorization: str | None) -> str | None:
    """The check an Authorization header fails by itself (MISSING, NOT_BEARER), else None: it
    carries a bearer token."""
    if authorization is None or not authorization.strip():
        return MISSING
    scheme, _, credentials = authorization.partition(" ")
    if scheme.lower() != "bearer" or not credentials.strip():
        return NOT_BEARER
    return None


def refusal_of(authorization: str | None, settings: Settings) -> TokenRefusal:
    """Why the request with this Authorization header was refused: no token, no bearer token,
    else what the verifier noted (a static token that does not match notes nothing)."""
    failed = header_check(authorization)
    if failed == MISSING:
        return TokenRefusal(MISSING, "no bearer token was sent")
    if failed == NOT_BEARER:
        return TokenRefusal(NOT_BEARER, "the Authorization header is not 'Bearer <token>'")
    notes = refusal_notes.get()
    if notes:
        return notes[0]
    if settings.oauth is None:
        return TokenRefusal(WRONG_TOKEN, "the bearer token is not this server's token")
    return TokenRefusal(INVALID, "the access token was refused")


def description(refusal: TokenRefusal) -> str:
    """`refusal` as an RFC 6750 error_description (no quote, backslash or non-ASCII)."""
    return _NOT_IN_DESCRIPTION.sub("'", refusal.said)


def payload(refusal: TokenRefusal, settings: Settings) -> ErrorPayload:
    """The typed refusal a 401's body carries."""
    return ErrorPayload(
        code=TOKEN_REFUSED,
        title=TOKEN_REFUSED_TITLE,
        cause=refusal.said,
        fix=_fix(refusal.check, settings),
        # The one a client cannot mend: the issuer's keys out of reach for a moment.
        retryable=refusal.check == KEYS_UNREADABLE,
        details={"check": refusal.check},
    )


def _fix(check: str, settings: Settings) -> str:
    oauth = settings.oauth
    if oauth is None:
        return (
            "send the header 'Authorization: Bearer <token>' with the token this server was "
            "started with (the file its --token-file names, or MCP_JOBS_TOKEN)"
        )
    issuer = oauth.issuer
    send = "and send it as 'Authorization: Bearer <token>'"
    if check == EXPIRED:
        return f"get a new access token from {issuer} (refresh it) {send}"
    if check == NOT_YET_VALID:
        return f"set this host's and {issuer}'s clocks right (NTP), then send the token again"
    if check == AUDIENCE:
        return f"get a token from {issuer} for the resource {oauth.audience} (RFC 8707) {send}"
    if check == ALGORITHM:
        algorithms = ", ".join(oauth.algorithms)
        return f"get a token from {issuer} signed with {algorithms} {send}"
    if check == KEYS_UNREADABLE:
        return "send the request again in a moment (the issuer's key set did not answer)"
    return f"get an access token from {issuer} (scope jobs:read) {send}"
