"""Backends behind one Protocol, chosen from a URL through a scheme -> factory table.

A driver is a plug-in: `register_driver("redis", factory)` (or an entry point in the group
`mcp_jobs.drivers`, named for the scheme and loading to the factory) makes `open_driver` answer
`redis://…` URLs, with no edit here. Memory, SQLite and PostgreSQL register the same way.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any

from engine.clock import SYSTEM_CLOCK, Clock
from engine.driver_errors import DatabaseUrlInvalidError, DriverExtraMissingError
from engine.drivers.base import (
    CAPABILITIES,
    JOBS,
    AckWrite,
    Capability,
    Driver,
    StepWrite,
    capabilities,
    require,
)
from engine.drivers.urls import (
    DATABASE_URL_ENV,
    check_postgres_url,
    driver_url_problem,
    fixed_on_argument,
    given_url,
    meant_url,
    slashes_missing,
    slashes_reason,
    sqlite_path,
)
from engine.errors import InvalidArgumentError
from engine.extras import install_line

DEFAULT_DATABASE_URL = "sqlite:///.mcp-jobs/jobs.db"
ENTRY_POINT_GROUP = "mcp_jobs.drivers"

# `factory(url, clock=clock, **options)`: checks the URL (DATABASE_URL_INVALID) before it opens
# anything, and returns the driver unopened (the client calls `migrate`).
DriverFactory = Callable[..., Driver]
DRIVERS: dict[str, DriverFactory] = {}


class DriverSchemeTakenError(RuntimeError):
    """Raised when a second factory claims a scheme: two drivers for one URL is a bug."""


def register_driver(scheme: str, factory: DriverFactory) -> None:
    """Answer `scheme://…` URLs with `factory`. Registering the same factory again is a no-op."""
    key = scheme.lower()
    taken = DRIVERS.get(key)
    if taken is not None and taken is not factory:
        raise DriverSchemeTakenError(f"the scheme {key}:// is already registered to {taken!r}")
    DRIVERS[key] = factory


def unregister_driver(scheme: str) -> None:
    """Forget `scheme` (a test's toy driver, once the test is done)."""
    DRIVERS.pop(scheme.lower(), None)


def resolve_url(url: str | None = None) -> str:
    """The explicit URL, else `MCP_JOBS_DATABASE_URL`, else the embedded SQLite default."""
    return url or os.environ.get(DATABASE_URL_ENV) or DEFAULT_DATABASE_URL


def open_driver(url: str | None = None, *, clock: Clock | None = None, **options: Any) -> Driver:
    """The driver for `url` (see `resolve_url`). A URL no driver could use raises
    DATABASE_URL_INVALID here, before any file is opened or connection tried; its fix mends
    the argument when the argument named it (the variable's export would change nothing)."""
    variable = os.environ.get(DATABASE_URL_ENV)
    url = given_url(url, variable)
    try:
        factory, resolved = _factory(resolve_url(url))
        # The driver refuses what only it checks (`sqlite://jobs.db` names no file): the
        # argument's fix too.
        driver = factory(resolved, clock=clock or SYSTEM_CLOCK, **options)
    except DatabaseUrlInvalidError as exc:
        if url is not None and url != variable:
            fixed_on_argument(exc, meant_url(url, registered_schemes()), DEFAULT_DATABASE_URL)
        raise
    require(driver, JOBS)
    return driver


def _factory(resolved: str) -> tuple[DriverFactory, str]:
    """The factory of `resolved`'s scheme, once the URL passed what is checked before a driver
    is handed it (`driver_url_problem`)."""
    scheme = resolved.split("://", 1)[0].lower() if "://" in resolved else ""
    factory = DRIVERS.get(scheme) or _from_entry_point(scheme)
    if factory is None:
        schemes = registered_schemes()
        bare = slashes_missing(resolved, schemes)
        if bare is not None:
            raise DatabaseUrlInvalidError(resolved, reason=slashes_reason(bare), scheme=bare)
        raise DatabaseUrlInvalidError(resolved, schemes=schemes)
    problem = driver_url_problem(resolved)
    if problem is not None:
        raise DatabaseUrlInvalidError(resolved, reason=problem)
    return factory, resolved


def registered_schemes() -> list[str]:
    """Every scheme `open_driver` answers: the table and the installed entry points."""
    return sorted(set(DRIVERS) | {ep.name.lower() for ep in entry_points(group=ENTRY_POINT_GROUP)})


def _from_entry_point(scheme: str) -> DriverFactory | None:
    # Looked up only for a scheme the table lacks, so the built-in drivers never pay for it.
    if not scheme:
        return None
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name.lower() == scheme:
            factory: DriverFactory = ep.load()
            register_driver(scheme, factory)
            return factory
    return None


def _taken_by(driver: type, scheme: str, options: dict[str, Any]) -> dict[str, Any]:
    """`options` when `driver` takes each of them; else INVALID_ARGUMENT naming the first it
    does not and what it takes (a URL moved to another driver keeps the old one's options)."""
    params = inspect.signature(driver).parameters
    takes = [n for n, p in params.items() if p.kind is p.KEYWORD_ONLY and n != "clock"]
    for name, value in options.items():
        if name not in takes:
            expected = f"an option the {scheme} driver takes: {', '.join(takes) or 'none'}"
            raise InvalidArgumentError(name, value, expected)
    return options


def _memory(url: str, *, clock: Clock, **options: Any) -> Driver:
    from engine.drivers.memory import MemoryDriver

    _taken_by(MemoryDriver, "memory", options)
    return MemoryDriver(clock)


def _sqlite(url: str, *, clock: Clock, **options: Any) -> Driver:
    path = sqlite_path(url)
    from engine.drivers.sqlite import SqliteDriver

    return SqliteDriver(path, clock=clock, **_taken_by(SqliteDriver, "sqlite", options))


def _postgres(url: str, *, clock: Clock, **options: Any) -> Driver:
    check_postgres_url(url)  # before asyncpg is imported or any connection is tried
    from engine.drivers.postgres import PostgresDriver

    return PostgresDriver(url, clock=clock, **_taken_by(PostgresDriver, "postgresql", options))


def _redis(url: str, *, clock: Clock, **options: Any) -> Driver:
    try:
        from engine.drivers.redis import RedisDriver, check_redis_url
    except ImportError as exc:  # redis-py is the optional extra `redis`
        fix = install_line("redis")
        raise DriverExtraMissingError("redis", "redis-py", str(exc), fix) from exc

    check_redis_url(url)  # before any connection is tried
    return RedisDriver(url, clock=clock, **_taken_by(RedisDriver, "redis", options))


def _nats(url: str, *, clock: Clock, **options: Any) -> Driver:
    try:
        from engine.drivers.nats import NatsDriver, check_nats_url
    except ImportError as exc:  # nats-py is the optional extra `nats`
        fix = install_line("nats")
        raise DriverExtraMissingError("nats", "nats-py", str(exc), fix) from exc

    check_nats_url(url)  # before any connection is tried
    return NatsDriver(url, clock=clock, **_taken_by(NatsDriver, "nats", options))


register_driver("memory", _memory)
register_driver("sqlite", _sqlite)
register_driver("postgresql", _postgres)
register_driver("postgres", _postgres)
register_driver("redis", _redis)
register_driver("rediss", _redis)
register_driver("nats", _nats)

__all__ = [
    "CAPABILITIES",
    "DATABASE_URL_ENV",
    "DEFAULT_DATABASE_URL",
    "DRIVERS",
    "ENTRY_POINT_GROUP",
    "AckWrite",
    "Capability",
    "Driver",
    "DriverFactory",
    "DriverSchemeTakenError",
    "StepWrite",
    "capabilities",
    "open_driver",
    "register_driver",
    "registered_schemes",
    "require",
    "resolve_url",
    "sqlite_path",
    "unregister_driver",
]
