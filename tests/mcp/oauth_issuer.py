"""A local authorization server for the OAuth tests: an RSA key, its JWKS and RFC 8414 metadata
served on a free loopback port (an http.server thread), and signed access tokens on demand."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

AUDIENCE = "https://jobs.example/mcp"


def _key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@dataclass
class Issuer:
    """Signs tokens with `key` (kid `kid`); `url` is its issuer identifier."""

    url: str
    key: rsa.RSAPrivateKey = field(default_factory=_key)
    kid: str = field(default_factory=lambda: uuid.uuid4().hex)
    # Paths served, for tests that break discovery.
    documents: dict[str, Any] = field(default_factory=dict)

    def jwks(self) -> dict[str, Any]:
        public = json.loads(RSAAlgorithm.to_jwk(self.key.public_key()))
        return {"keys": [{**public, "kid": self.kid, "use": "sig", "alg": "RS256"}]}

    def token(
        self,
        scopes: str = "jobs:read",
        *,
        tenant: str | None = None,
        issuer: str | None = None,
        audience: str = AUDIENCE,
        expires_in: int = 600,
        key: rsa.RSAPrivateKey | None = None,
        subject: str = "agent-1",
        **claims: Any,
    ) -> str:
        now = int(time.time())
        payload: dict[str, Any] = {
            "iss": issuer or self.url,
            "aud": audience,
            "sub": subject,
            "client_id": "test-client",
            "iat": now,
            "exp": now + expires_in,
            "scope": scopes,
            **claims,
        }
        if tenant is not None:
            payload["tenant"] = tenant
        return jwt.encode(payload, key or self.key, algorithm="RS256", headers={"kid": self.kid})


@contextmanager
def issuer() -> Iterator[Issuer]:
    """An authorization server on 127.0.0.1 for the life of the block."""
    holder: list[Issuer] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            document = holder[0].documents.get(self.path)
            if document is None:
                self.send_error(404)
                return
            body = json.dumps(document).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # quiet: the tests read the server's own log

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    url = f"http://127.0.0.1:{server.server_address[1]}"
    made = Issuer(url)
    made.documents = {
        "/.well-known/oauth-authorization-server": {
            "issuer": url,
            "jwks_uri": f"{url}/jwks.json",
            "token_endpoint": f"{url}/token",
            "response_types_supported": ["code"],
        },
        "/jwks.json": made.jwks(),
    }
    holder.append(made)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield made
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
