"""Streamable HTTP: loopback by default, and a bearer token on every request.

A request without the token (or with a wrong one) is answered 401 by the SDK's auth middleware
before it reaches a session, so it touches nothing: no database call, no event.
"""

from __future__ import annotations

import hmac

from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings

TOKEN_CLIENT_ID = "mcp-jobs-token"


class StaticTokenVerifier:
    """Accepts exactly one shared secret (`MCP_JOBS_TOKEN`), compared in constant time."""

    def __init__(self, token: str) -> None:
        self._token = token.encode()

    async def verify_token(self, token: str) -> AccessToken | None:
        if hmac.compare_digest(token.encode(), self._token):
            return AccessToken(token=token, client_id=TOKEN_CLIENT_ID, scopes=[])
        return None


def auth_settings(host: str, port: int) -> AuthSettings:
    """Resource-server-only settings: the token is checked here; no OAuth endpoints are served."""
    shown = f"[{host}]" if ":" in host else host
    return AuthSettings(issuer_url=f"http://{shown}:{port}", resource_server_url=None)
