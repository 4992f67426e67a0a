"""asyncpg failures → `DriverUnavailableError`, converted where they arise and chained with `from`;
a value the database refused (a data exception) → `InvalidArgumentError` instead, never
"unavailable": retrying the same value fails the same way.

Also the one judgement the retry paths need: did the failure break the connection (the server
restarted, the network dropped, the pool handed out a connection the server had closed)? Such a
failure says nothing about whether the statement committed; the caller decides if a retry is safe.
"""

from __future__ import annotations

import asyncpg
import asyncpg.exceptions as pgx

from engine.driver_errors import (
    DatabaseUrlInvalidError,
    DriverUnavailableError,
    StorageFullError,
    StoreDamagedError,
)
from engine.drivers.damage import UndecodableRow
from engine.drivers.postgres.stored import show_job_line
from engine.drivers.urls import migrate_fix, report_fix
from engine.errors import InvalidArgumentError

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
# SQLSTATE classes that blame the value, not the server: 22 data exception (a NUL byte, a
# number out of range), 23 integrity constraint violation, 54 program limit exceeded (an index
# row over the btree limit).
_VALUE_REFUSED_CLASSES = frozenset({"22", "23", "54"})
# SQLSTATEs after which the server rolled the transaction back whole, so the same operation sent
# again is safe and most often goes through: class 40 (40001 serialization failure, 40P01
# deadlock) and 55P03 (a lock not granted within lock_timeout).
_ROLLED_BACK_CLASSES = frozenset({"40"})
_ROLLED_BACK_STATES = frozenset({"55P03"})
# The unique index of rule 2. Its violation is no bad value: the enqueue that raised it learns
# the holder and goes in again, so it stays a driver failure the enqueue path recognises.
DEDUPE_INDEX = "jobs_dedupe_live_idx"


def is_connection_failure(exc: BaseException) -> bool:
    """True when `exc` (or the error it was converted from) broke the connection."""
    if isinstance(exc, DriverUnavailableError) and exc.__cause__ is not None:
        exc = exc.__cause__
    return isinstance(exc, CONNECTION_FAILURES)


# What asyncpg raises on a connection the server ended (pg_terminate_backend, a restart) while
# the server itself answers: said "cannot reach the server", it sent an operator to look for an
# outage that was not there.
_CONNECTION_ENDED = (
    pgx.InternalClientError,
    asyncpg.ConnectionDoesNotExistError,
    pgx.AdminShutdownError,
)


def connection_lost(exc: BaseException) -> str:
    """How a connection failure reads: the server out of reach, or a connection it ended."""
    if isinstance(exc, DriverUnavailableError) and exc.__cause__ is not None:
        exc = exc.__cause__
    if isinstance(exc, _CONNECTION_ENDED):
        return "the server ended this connection (terminated, or restarting)"
    return "cannot reach the server"


def is_rolled_back(exc: BaseException) -> bool:
    """True when `exc` (or the error it was converted from) is the server rolling back a
    transaction that met another (see `_ROLLED_BACK_CLASSES`): nothing of it was written."""
    if isinstance(exc, DriverUnavailableError) and exc.__cause__ is not None:
        exc = exc.__cause__
    if not isinstance(exc, asyncpg.PostgresError):
        return False
    sqlstate = str(exc.sqlstate or "")
    return sqlstate[:2] in _ROLLED_BACK_CLASSES or sqlstate in _ROLLED_BACK_STATES


def is_retried(exc: BaseException) -> bool:
    """True when the retry paths (retry.py) run an operation again after `exc`: a broken
    connection, or a transaction the server rolled back."""
    return is_connection_failure(exc) or is_rolled_back(exc)


# A converted error is chained to what it was converted from once or twice: look no further.
_CHAIN_DEPTH = 4


def data_error(exc: BaseException) -> BaseException | None:
    """The refusal of a value behind `exc` (`exc` itself or what it was converted from), or
    None: asyncpg unable to encode an argument (an int beyond int64, a lone surrogate), or a
    SQLSTATE class 22, 23 (save a dedupe conflict) or 54. Such a statement fails the same way
    every time it is sent, and in a batch it names one item's value, not the others'."""
    current: BaseException | None = exc
    for _ in range(_CHAIN_DEPTH):
        if current is None:
            return None
        if isinstance(current, asyncpg.InterfaceError) and isinstance(current, ValueError):
            return current  # asyncpg's own DataError: nothing reached the server
        if isinstance(current, asyncpg.PostgresError):
            sqlstate = str(current.sqlstate or "")
            if sqlstate[:2] not in _VALUE_REFUSED_CLASSES:
                return None
            dedupe = isinstance(current, pgx.UniqueViolationError) and (
                current.constraint_name == DEDUPE_INDEX
            )
            return None if dedupe else current
        current = current.__cause__
    return None


def refused_value(exc: BaseException) -> InvalidArgumentError | None:
    """INVALID_ARGUMENT when `exc` says a value was refused (see `data_error`), else None."""
    refusal = data_error(exc)
    if refusal is None:
        return None
    if not isinstance(refusal, asyncpg.PostgresError):
        return InvalidArgumentError("value", _detail(refusal), "a value PostgreSQL can store")
    argument = refusal.column_name or refusal.constraint_name or "value"
    return InvalidArgumentError(
        argument,
        _detail(refusal),
        f"a value PostgreSQL accepts (it refused one: SQLSTATE {refusal.sqlstate})",
    )


def describe_refusal(refusal: BaseException) -> str:
    """The refusal in a few words for a stored error: its SQLSTATE and the server's message."""
    lines = str(refusal).strip().splitlines()
    message = lines[0][:200] if lines else type(refusal).__name__
    state = getattr(refusal, "sqlstate", None)
    where = f"SQLSTATE {state}: " if isinstance(state, str) else ""
    return f"PostgreSQL refused it ({where}{message})"


def _detail(exc: BaseException) -> str:
    return str(exc).strip() or type(exc).__name__


def setting_refused(exc: BaseException) -> bool:
    """True when the server refused a session at its start over a setting: asyncpg sends each
    URL option it does not know (`?sslmod=`, `?statement_timeout=abc`) as one, and the driver's
    own are valid. Told by where the server raised it, not by its (translated) message."""
    return (
        isinstance(exc, asyncpg.PostgresError)
        and getattr(exc, "severity_en", None) == "FATAL"
        and getattr(exc, "server_source_filename", None) == "guc.c"
    )


# The server answered and refused the session the URL asks for: 3D000 (no such database),
# 28000 (no such role, or no pg_hba.conf rule lets it in) and its 28P01 (password refused).
_SESSION_REFUSED = (pgx.InvalidCatalogNameError, pgx.InvalidAuthorizationSpecificationError)


def session_refused(exc: BaseException) -> bool:
    """True when the server refused a session over the URL's database, user or password: the
    same URL is refused the same way until someone changes the URL or the server's rules."""
    return isinstance(exc, _SESSION_REFUSED)


def unavailable(
    exc: BaseException, url: str, schema: str
) -> (
    DriverUnavailableError
    | InvalidArgumentError
    | StorageFullError
    | DatabaseUrlInvalidError
    | StoreDamagedError
):
    """The typed error for an asyncpg/OS failure; the caller raises it `from exc`. A refused
    value is INVALID_ARGUMENT (terminal), whatever else is true of the connection; a full disk
    on the server is STORAGE_FULL; a URL option, database, user or password the server refuses
    is DATABASE_URL_INVALID; data or an index the server found damaged is STORE_DAMAGED
    (terminal)."""
    if setting_refused(exc):
        reason = (
            "the server refused a setting that the URL's query string gives it (asyncpg sends "
            f"every option it does not know to the server as a setting): {_detail(exc)}"
        )
        # The report names the option and says what to do with it.
        return DatabaseUrlInvalidError(url, reason=reason, fix=report_fix(url), answered=True)
    if session_refused(exc):
        reason = f"the server refused the session it names: {_detail(exc)}"
        return DatabaseUrlInvalidError(url, reason=reason, fix=report_fix(url), answered=True)
    refused = refused_value(exc)
    if refused is not None:
        return refused
    detail = _detail(exc)
    if isinstance(exc, _SCHEMA_MISSING):
        cause = f"the {schema} schema is missing or out of date ({detail})"
        return DriverUnavailableError("postgres", cause, migrate_fix(url))
    if is_connection_failure(exc):
        cause = f"{connection_lost(exc)} ({type(exc).__name__}: {detail})"
        return DriverUnavailableError("postgres", cause, report_fix(url))
    state = getattr(exc, "sqlstate", None)
    if isinstance(exc, pgx.DiskFullError):  # 53100: the server's data or WAL volume
        return StorageFullError("postgres", "the server's data directory", detail, report_fix(url))
    if isinstance(exc, pgx.DataCorruptedError | pgx.IndexCorruptedError):  # XX001, XX002
        cause = (
            f"the server found damaged data (SQLSTATE {state}: {detail}); a damaged index is "
            "rebuilt by REINDEX, a damaged table restored from a backup"
        )
        return StoreDamagedError("postgres", cause, report_fix(url))
    if is_rolled_back(exc):
        cause = (
            f"the server rolled back a transaction that met another (SQLSTATE {state}: {detail}); "
            "what it wrote was undone, and the same call can be made again"
        )
        return DriverUnavailableError("postgres", cause, report_fix(url))
    cause = f"the server refused the operation ({type(exc).__name__}, SQLSTATE {state}: {detail})"
    return DriverUnavailableError("postgres", cause, report_fix(url))


def damaged(exc: UndecodableRow, url: str, schema: str) -> StoreDamagedError:
    """A job's or an event's row holding a value of a shape the driver never writes (by hand:
    jsonb takes any JSON): STORE_DAMAGED naming the job, its fix printing them as stored."""
    cause = f"{exc}: the {exc.what}'s row holds a value the driver did not write"
    return StoreDamagedError("postgres", cause, show_job_line(url, schema, exc.job_id, exc.kind))
