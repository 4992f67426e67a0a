"""asyncpg failures → `DriverUnavailableError`, converted where they arise and chained with `from`.

Also the one judgement the retry paths need: did the failure break the connection (the server
restarted, the network dropped, the pool handed out a connection the server had closed)? Such a
failure says nothing about whether the statement committed; the caller decides if a retry is safe.
"""

from __future__ import annotations

from urllib.parse import urlsplit

import asyncpg
import asyncpg.exceptions as pgx

from engine.errors import DriverUnavailableError

# What asyncpg and the OS raise when the path to the server is gone or not up yet.
CONNECTION_FAILURES: tuple[type[BaseException], ...] = (
    OSError,
    TimeoutError,
    asyncpg.PostgresConnectionError,
    asyncpg.InterfaceError,
    pgx.AdminShutdownError,
    pgx.CrashShutdownError,
    pgx.CannotConnectNowError,
    pgx.TooManyConnectionsError,
    # What a pooled connection raises when the server ended its session while it sat idle
    # ("cannot switch to state …; another operation is in progress"): the session is gone.
    pgx.InternalClientError,
)
# Everything the driver converts. Anything else is a bug in this package and stays itself.
DRIVER_FAILURES: tuple[type[BaseException], ...] = (
    *CONNECTION_FAILURES,
    asyncpg.PostgresError,
)
_SCHEMA_MISSING = (pgx.UndefinedTableError, pgx.InvalidSchemaNameError, pgx.UndefinedFunctionError)


def is_connection_failure(exc: BaseException) -> bool:
    """True when `exc` (or the error it was converted from) broke the connection."""
    if isinstance(exc, DriverUnavailableError) and exc.__cause__ is not None:
        exc = exc.__cause__
    return isinstance(exc, CONNECTION_FAILURES)


def readiness_fix(url: str) -> str:
    """A one-line check of the server named by `url`, without its password."""
    try:
        parts = urlsplit(url)
        host, port = parts.hostname, parts.port
    except ValueError:
        return "pg_isready"
    args = (f" -h {host}" if host else "") + (f" -p {port}" if port else "")
    return f"pg_isready{args}"


def unavailable(exc: BaseException, url: str, schema: str) -> DriverUnavailableError:
    """The typed error for an asyncpg/OS failure; the caller raises it `from exc`."""
    detail = str(exc).strip() or type(exc).__name__
    if isinstance(exc, _SCHEMA_MISSING):
        cause = f"the {schema} schema is missing or out of date ({detail})"
        return DriverUnavailableError("postgres", cause, "mcp-jobs db migrate")
    if is_connection_failure(exc):
        cause = f"cannot reach the server ({type(exc).__name__}: {detail})"
        return DriverUnavailableError("postgres", cause, readiness_fix(url))
    cause = f"the server refused the operation ({type(exc).__name__}: {detail})"
    return DriverUnavailableError("postgres", cause)
