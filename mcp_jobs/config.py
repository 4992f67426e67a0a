"""Server and CLI settings: flags first, then `MCP_JOBS_*` environment variables, then defaults.

Also loads the application modules (`--app`), whose import registers their jobs, tasks and
backfills with the engine's default registries, and masks a database URL's password for output.
"""

from __future__ import annotations

import importlib
import math
import os
import shlex
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from engine.drivers import resolve_url
from engine.errors import JobsError
from mcp_jobs.errors import (
    AppImportError,
    HttpSettingInvalidError,
    TokenConflictError,
    TokenFileError,
)

APP_ENV = "MCP_JOBS_APP"
ENVIRONMENT_ENV = "MCP_JOBS_ENV"
TOKEN_ENV = "MCP_JOBS_TOKEN"
TOKEN_FILE_ENV = "MCP_JOBS_TOKEN_FILE"
SESSION_IDLE_ENV = "MCP_JOBS_SESSION_IDLE_SECONDS"
MAX_SESSIONS_ENV = "MCP_JOBS_MAX_SESSIONS"
DEFAULT_ENVIRONMENT = "development"
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
# An HTTP session nobody has sent a request for this long is closed (its id then answers 404):
# a client that went away without DELETE must not hold server memory forever.
DEFAULT_SESSION_IDLE_SECONDS = 30 * 60.0
# Live HTTP sessions at once; one more is refused with 503 until one ends or expires.
DEFAULT_MAX_SESSIONS = 1000


@dataclass(frozen=True)
class ServerLimits:
    """What one call may ask of the server. Each breach is a typed `LIMIT_EXCEEDED`."""

    # An input is a job's arguments, not its data: big payloads belong in the app's own storage.
    max_input_bytes: int = 64 * 1024
    # One JSON-RPC message, on stdio as on HTTP (the SDK's HTTP body limit): a bigger line is
    # refused as it streams in, never held whole.
    max_request_bytes: int = 4 * 1024 * 1024
    max_page_size: int = 200
    # Most MCP clients give up on a request after about a minute; a longer wait would just be
    # abandoned mid-flight, so waits stay under that and the agent calls again.
    max_wait_seconds: float = 50.0
    default_wait_seconds: float = 20.0
    # How long a ready job may wait before diagnose calls the backlog old.
    backlog_age_ms: int = 60_000


@dataclass(frozen=True)
class Settings:
    database_url: str | None = None
    apps: tuple[str, ...] = ()
    environment: str = DEFAULT_ENVIRONMENT
    read_only: bool = False
    tenant: str | None = None
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    token: str | None = None
    # Where `token` was read from, for logs and fix lines (never the token itself).
    token_source: str = TOKEN_ENV
    session_idle_seconds: float = DEFAULT_SESSION_IDLE_SECONDS
    max_sessions: int = DEFAULT_MAX_SESSIONS
    limits: ServerLimits = field(default_factory=ServerLimits)

    @property
    def url(self) -> str:
        return resolve_url(self.database_url)


def split_apps(values: Iterable[str]) -> tuple[str, ...]:
    out: list[str] = []
    for value in values:
        out.extend(part.strip() for part in value.split(",") if part.strip())
    return tuple(dict.fromkeys(out))


def settings_from_env(
    *,
    database_url: str | None = None,
    apps: Iterable[str] | None = None,
    read_only: bool = False,
    tenant: str | None = None,
    host: str | None = None,
    port: int | None = None,
) -> Settings:
    """Flags given here win over the environment; unset ones fall back to `MCP_JOBS_*`."""
    app_values = list(apps or ()) or [os.environ.get(APP_ENV, "")]
    return Settings(
        database_url=database_url or None,
        apps=split_apps(app_values),
        environment=os.environ.get(ENVIRONMENT_ENV) or DEFAULT_ENVIRONMENT,
        read_only=read_only,
        tenant=tenant or None,
        host=host or DEFAULT_HOST,
        port=port if port is not None else DEFAULT_PORT,
        token=os.environ.get(TOKEN_ENV) or None,
    )


def http_settings(
    settings: Settings,
    *,
    token_file: str | None = None,
    session_idle_seconds: float | None = None,
    max_sessions: int | None = None,
) -> Settings:
    """`settings` for `serve --transport http`: each flag given here wins over its `MCP_JOBS_*`
    variable, and the token is read from its file when one is named. Read only when serving
    HTTP, so a bad value here never breaks another command."""
    token_file = token_file or os.environ.get(TOKEN_FILE_ENV) or None
    token, source = settings.token, TOKEN_ENV
    if token_file is not None:
        if token is not None:
            raise TokenConflictError(token_file)
        token, source = read_token_file(token_file), token_file
    if session_idle_seconds is None:
        session_idle_seconds = _env_number(SESSION_IDLE_ENV, DEFAULT_SESSION_IDLE_SECONDS, float)
    if max_sessions is None:
        max_sessions = int(_env_number(MAX_SESSIONS_ENV, DEFAULT_MAX_SESSIONS, int))
    return replace(
        settings,
        host=settings.host.strip("[]"),  # `--host [::1]` as URLs write it: the socket wants ::1
        token=token,
        token_source=source,
        session_idle_seconds=session_idle_seconds,
        max_sessions=max_sessions,
    )


def read_token_file(path: str) -> str:
    """The token a file holds, without the newline `openssl rand -hex 32 > FILE` leaves."""
    fix = f"(umask 077 && openssl rand -hex 32 > {shlex.quote(path)})"
    try:
        token = Path(path).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise TokenFileError(path, reason, fix) from exc
    if not token:
        raise TokenFileError(path, "the file is empty", fix)
    return token


def _env_number(name: str, default: float, kind: type[float] | type[int]) -> float:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = kind(raw)
    except ValueError:
        value = 0
    if not (math.isfinite(value) and value > 0):
        expected = "a positive number" if kind is float else "a positive whole number"
        raise HttpSettingInvalidError(name, raw, expected, f"export {name}={default:g}")
    return value


def load_apps(modules: Iterable[str]) -> None:
    """Import each app module so its declarations register. A declaration error (a
    `JobsError`, e.g. `IDEMPOTENCY_REQUIRED`) passes through with its own code."""
    for module in modules:
        try:
            importlib.import_module(module)
        except JobsError:
            raise
        except Exception as exc:  # any import-time failure of user code is reported, not raised
            raise AppImportError(module, f"{type(exc).__name__}: {exc}") from exc


def redact(url: str) -> str:
    """The URL without its password (in the user part or a `password=` parameter), for output
    and logs. Works on the raw text, so a percent-encoded password is masked too."""
    parts = urlsplit(url)
    userinfo, at, host = parts.netloc.rpartition("@")
    netloc = f"{userinfo.partition(':')[0]}:***@{host}" if at and ":" in userinfo else parts.netloc
    query = "&".join(
        f"{key}=***" if key.lower() == "password" else f"{key}{eq}{value}"
        for key, eq, value in (pair.partition("=") for pair in parts.query.split("&"))
    )
    if (netloc, query) == (parts.netloc, parts.query):
        return url  # nothing to hide (and urlunsplit would rewrite `sqlite:///…`)
    return urlunsplit(parts._replace(netloc=netloc, query=query))
