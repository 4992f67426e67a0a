"""The `mcp-jobs serve` command that starts this HTTP server as it runs, for a fix that changes
one of its settings (a Host name to allow, the issuer its metadata names, a larger session
bound): a flag for each setting that is not its default, written into the context every fix
line carries (`FixContext`: the database URL made absolute, the apps, what they declared).

A static token read from `MCP_JOBS_TOKEN` is not written: it is a secret, and the variable
carries it to the command run where it is set.
"""

from __future__ import annotations

import os

from mcp_jobs.config import (
    DEFAULT_OAUTH_ALGORITHMS,
    DEFAULT_OAUTH_TENANT_CLAIM,
    TOKEN_ENV,
    OAuthSettings,
    Settings,
)
from mcp_jobs.fix_context import Face, FixContext

_DEFAULTS = Settings()


def serve_line(settings: Settings, *, port: int | None = None, face: Face = "mcp") -> str:
    """The command that serves `settings` over HTTP, on `port` when given (the port a server
    started on port 0 took)."""
    return FixContext.of(settings, face=face).command(*serve_words(settings, port=port))


def serve_words(settings: Settings, *, port: int | None = None) -> list[str]:
    """`serve_line`'s words after the program, before the context is written in."""
    words = ["serve", "--transport", "http"]
    if settings.host != _DEFAULTS.host:
        words += ["--host", settings.host]
    shown_port = settings.port if port is None else port
    if shown_port != _DEFAULTS.port:
        words += ["--port", str(shown_port)]
    if settings.oauth is None and settings.token_source != TOKEN_ENV:
        # Absolute: run elsewhere, a relative path would name no file, and its fix writes one.
        words += ["--token-file", os.path.abspath(settings.token_source)]
    if settings.session_idle_seconds != _DEFAULTS.session_idle_seconds:
        words += ["--session-idle-seconds", _number(settings.session_idle_seconds)]
    if settings.max_sessions != _DEFAULTS.max_sessions:
        words += ["--max-sessions", str(settings.max_sessions)]
    for name in settings.allowed_hosts:
        words += ["--allowed-host", name]
    if settings.oauth is not None:
        words += _oauth_words(settings.oauth, settings.host, settings.port)
    if settings.tenant is not None:
        words += ["--tenant", settings.tenant]
    if settings.read_only:
        words.append("--read-only")
    if settings.confirm_writes != _DEFAULTS.confirm_writes:
        words += ["--confirm-writes", "on" if settings.confirm_writes else "off"]
    if settings.confirm_ttl_seconds != _DEFAULTS.confirm_ttl_seconds:
        words += ["--confirm-ttl-seconds", _number(settings.confirm_ttl_seconds)]
    return words


def _oauth_words(oauth: OAuthSettings, host: str, port: int) -> list[str]:
    words = ["--oauth-issuer", oauth.issuer]
    shown = f"[{host}]" if ":" in host else host
    # What config.read_oauth makes of no --oauth-resource-url on this host and port.
    if oauth.resource_url != f"http://{shown}:{port}/mcp":
        words += ["--oauth-resource-url", oauth.resource_url]
    if oauth.audience != oauth.resource_url:
        words += ["--oauth-audience", oauth.audience]
    if oauth.jwks_url is not None:
        words += ["--oauth-jwks-url", oauth.jwks_url]
    if oauth.algorithms != DEFAULT_OAUTH_ALGORITHMS:
        words += ["--oauth-algorithms", ",".join(oauth.algorithms)]
    if oauth.tenant_claim != DEFAULT_OAUTH_TENANT_CLAIM:
        words += ["--oauth-tenant-claim", oauth.tenant_claim]
    return words


def _number(value: float) -> str:
    """`value` as a flag reads it back: short where that loses nothing (90, 0.5)."""
    short = f"{value:g}"
    return short if float(short) == value else repr(value)
