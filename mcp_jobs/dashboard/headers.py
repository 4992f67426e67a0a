"""The headers every dashboard answer carries, whoever wrote it (a page, the auth gate, a 404).

No page may be framed by another site: on loopback no token is asked, so a page the operator
visits could frame a confirmation form (with its valid CSRF token) and trick the click. The
Content-Security-Policy also runs no script but the overview's own reload (by its hash), loads
nothing from elsewhere and posts forms only here.
"""

from __future__ import annotations

import base64
import hashlib

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mcp_jobs.dashboard.html import RELOAD_JS


def _hash(source: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(source.encode()).digest()).decode() + "'"


POLICY = "; ".join(
    (
        "default-src 'none'",
        f"script-src {_hash(RELOAD_JS)}",
        # The page's <style> and the timeline bars' style attributes (placed per step).
        "style-src 'unsafe-inline'",
        "img-src 'self'",
        "form-action 'self'",
        "base-uri 'none'",
        "frame-ancestors 'none'",
    )
)
HEADERS = [
    (b"x-frame-options", b"DENY"),  # for browsers that predate frame-ancestors
    (b"content-security-policy", POLICY.encode()),
]


class Guarded:
    """ASGI middleware adding `HEADERS` to every HTTP answer of `app`."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def guarded(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", ()), *HEADERS]}
            await send(message)

        await self.app(scope, receive, guarded)
