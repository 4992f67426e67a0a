"""Server and CLI settings: flags first, then `MCP_JOBS_*` environment variables, then defaults.

Also loads the application modules (`--app`), whose import registers their jobs, tasks and
backfills with the engine's default registries, and masks a database URL's password for output.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from urllib.parse import urlsplit, urlunsplit

from engine.drivers import resolve_url
from engine.errors import JobsError
from mcp_jobs.errors import AppImportError

APP_ENV = "MCP_JOBS_APP"
ENVIRONMENT_ENV = "MCP_JOBS_ENV"
TOKEN_ENV = "MCP_JOBS_TOKEN"
DEFAULT_ENVIRONMENT = "development"
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765


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
