"""The connection: the URL checked before anything opens, one client pool, every Redis or
network failure turned into `DriverUnavailableError` where it arises (chained with `from`), a
key of ours that another program overwrote into `StoreDamagedError`, a server at `maxmemory`
into `MemoryFullError` (STORAGE_FULL), and the settles held through dropped connections
(`passes`).
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TypeVar
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.exceptions import (
    AskError,
    AuthenticationError,
    AuthenticationWrongNumberOfArgsError,
    AuthorizationError,
    ClusterCrossSlotError,
    ClusterDownError,
    MasterDownError,
    NoPermissionError,
    OutOfMemoryError,
    RedisError,
    ResponseError,
    TryAgainError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from engine.driver_errors import (
    DatabaseUrlInvalidError,
    DriverUnavailableError,
    StorageFullError,
    StoreDamagedError,
)
from engine.drivers.damage import UndecodableRow
from engine.drivers.lease_grace import LeaseGrace
from engine.drivers.redis import memory
from engine.drivers.redis.fix_lines import stored_values
from engine.drivers.redis.keys import DEFAULT_PREFIX, Keys
from engine.drivers.urls import report_fix, split_param
from engine.errors import JobsError

SCHEMES = ("redis", "rediss")
PREFIX_PARAM = "prefix"
# Failures of the server or the network, not of a command: what DRIVER_UNAVAILABLE means.
UNAVAILABLE = (RedisConnectionError, RedisTimeoutError, OSError)
# What a settle is held through: those, and a server refusing writes at `maxmemory` (a prune or
# an operator frees memory; given up, the finished job would run again).
HELD_THROUGH = (*UNAVAILABLE, OutOfMemoryError)
# How long a reply may take before the server counts as not answering (stopped, blocked,
# overloaded): the driver's scripts hold the server for milliseconds, and a call an agent makes
# must end in DRIVER_UNAVAILABLE rather than wait for as long as the server does.
REPLY_TIMEOUT_S = 10.0
# What a script's failure adds to the server's reply (its SHA and Lua line): Redis 7 appends
# "script: <sha>, on @user_script:44.", Redis 6 prefixes "Error running script (call to
# f_<sha>): @user_script:44: ". Nothing a user can act on.
_SCRIPT_NOISE = re.compile(
    r"\s*script: [0-9a-f]{40}, on @user_script:\d+\.?"
    r"|Error running script \(call to f_[0-9a-f]{40}\): @user_script:\d+: "
)

T = TypeVar("T")

# The server's refusals of what the URL says (its user, password, database number): the same
# URL is refused the same way until someone changes it or the server's ACL.
_CREDENTIALS_REFUSED = (
    AuthenticationError,
    AuthorizationError,
    AuthenticationWrongNumberOfArgsError,
)
# The replies only a node of a Redis Cluster gives (MOVED, ASK, CLUSTERDOWN, CROSSSLOT,
# TRYAGAIN): the driver's scripts touch keys of many hash slots, which a cluster refuses. Not
# MASTERDOWN, a ClusterDownError to redis-py but a replica's, cut off from its primary.
_CLUSTER_REPLIES = (AskError, ClusterDownError, ClusterCrossSlotError, TryAgainError)
CLUSTER_REFUSED = (
    "the server is a node of a Redis Cluster, which the driver does not support (its scripts "
    "touch keys of many hash slots): point the URL at a standalone Redis or a primary"
)


# A server that asks for a password the URL does not give: its reply (NOAUTH, or a HELLO's
# long refusal) names no URL, so the reason writes where in this URL the password goes.
PASSWORD_ASKED = (
    "the server asks for a password (its requirepass, or an ACL user's) and the URL gives none"
)


def url_refused(exc: BaseException, url: str | None = None) -> str | None:
    """Why the server refuses what the URL asks for, or None when `exc` is no such refusal.
    `url`: the URL refused, to tell a password left out from a wrong one."""
    if isinstance(exc, _CREDENTIALS_REFUSED):
        form = None if url is None else with_password_slot(url)
        if form is not None and "invalid username-password" not in str(exc):
            return f"{PASSWORD_ASKED}: write it in the URL, {form}"
        return f"the server refused the URL's user or password ({exc})"
    if isinstance(exc, NoPermissionError):
        return f"the URL's user may not run a command or reach a key the driver needs ({exc})"
    if isinstance(exc, _CLUSTER_REPLIES) and not isinstance(exc, MasterDownError):
        return f"{CLUSTER_REFUSED} ({type(exc).__name__}: {plain(exc)})"
    if isinstance(exc, ResponseError) and "DB index is out of range" in str(exc):
        return (
            "the server has fewer databases than the number after the URL's host (its "
            "`databases` setting)"
        )
    return None


def with_password_slot(url: str) -> str | None:
    """`url` with PASSWORD where its password goes, when it gives no user or password (in its
    host part or as `?username=` / `?password=`); else None. Only the host, port, database and
    options are written: there is no secret in it to hide."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    given = {key for key, _ in parse_qsl(parts.query)} & {"username", "password"}
    if parts.username or parts.password or given or not parts.hostname:
        return None
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    netloc = f":PASSWORD@{host}" + (f":{port}" if port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, ""))


def check_redis_url(url: str) -> None:
    """DATABASE_URL_INVALID for a URL redis-py could not use, before a connection is tried."""
    parts = urlsplit(url)
    if parts.scheme.lower() not in SCHEMES:
        raise DatabaseUrlInvalidError(url, "a Redis URL starts with redis:// or rediss://")
    if not parts.hostname:
        raise DatabaseUrlInvalidError(url, "the Redis URL names no host")
    db = parts.path.strip("/")
    if db and not db.isdigit():
        raise DatabaseUrlInvalidError(url, "the Redis database after the host is a number")


def split_prefix(url: str) -> tuple[str, str | None]:
    """The URL redis-py reads, and the key prefix its `?prefix=` named."""
    return split_param(url, PREFIX_PARAM)


def open_client(url: str, connect_timeout_s: float, reply_timeout_s: float | None) -> Redis:
    # A dropped connection is retried a few times with backoff. A resent guarded write re-checks
    # its guards; a claim resent after its reply was lost leaves the first claim's rows to their
    # lease expiry (rule 13), so nothing is lost, only delayed. A reply that does not come is not
    # sent again: each try would wait the whole timeout.
    return Redis.from_url(
        url,
        decode_responses=True,
        socket_connect_timeout=connect_timeout_s,
        socket_timeout=reply_timeout_s,
        health_check_interval=30,
        retry=Retry(ExponentialBackoff(cap=1.0, base=0.05), 3, (RedisConnectionError,)),
        retry_on_error=[RedisConnectionError],
    )


def resolve_prefix(url: str, prefix: str | None) -> str:
    return prefix or split_prefix(url)[1] or DEFAULT_PREFIX


class Fixes:
    """What the driver's error boundary (`guard`) needs. The fix lines its errors carry:
    `report` (`mcp-jobs db report`) for a server that does not answer, is full or holds keys of
    another type; `damaged` for a value that another program wrote, with a line that prints it
    as stored. The client, to read the server's memory when it refuses a write. And the lease
    grace it tells of an outage (claims.py reads it)."""

    def __init__(self, url: str, keys: Keys, client: Redis) -> None:
        self.url = url
        self.keys = keys
        self.report = report_fix(url)
        self.client = client
        self.grace = LeaseGrace()

    def damaged(self, exc: UndecodableRow) -> StoreDamagedError:
        cause = f"{exc}: the {exc.what}'s value is not one the driver wrote (another program's)"
        return StoreDamagedError("redis", cause, stored_values(self.url, self.keys, exc))


@asynccontextmanager
async def guard(fixes: Fixes) -> AsyncIterator[None]:
    """Redis or network failures raised inside come out typed (`converted`), and a value the
    driver cannot read as STORE_DAMAGED."""
    try:
        yield
    except UndecodableRow as exc:
        raise fixes.damaged(exc) from exc
    except (*UNAVAILABLE, RedisError) as exc:
        if isinstance(exc, HELD_THROUGH):
            # Heartbeats failed meanwhile: the leases that ran out are spared one lease longer.
            fixes.grace.outage()
        if isinstance(exc, OutOfMemoryError):
            raise await memory_full(fixes, exc) from exc
        raise converted(exc, fixes.url, fixes.report) from exc


def converted(exc: BaseException, url: str, fix: str) -> JobsError:
    """DATABASE_URL_INVALID for a user, password or database number the server refuses,
    STORAGE_FULL for a server out of memory under `maxmemory`, STORE_DAMAGED for a key of ours
    holding another type, else DRIVER_UNAVAILABLE."""
    refused = url_refused(exc, url)
    if refused is not None:
        return DatabaseUrlInvalidError(url, refused, fix=fix, answered=True)
    if isinstance(exc, OutOfMemoryError):
        return MemoryFullError(plain(exc), None, url, fix)
    if isinstance(exc, RedisError) and wrong_type(exc):
        cause = (
            f"{plain(exc)}: a key under this prefix holds another type than the driver keeps "
            "there, so another program writes under the prefix; the report checks the store's "
            "fixed keys"
        )
        return StoreDamagedError("redis", cause, fix)
    cause = f"{type(exc).__name__}: {plain(exc)}"
    if isinstance(exc, RedisTimeoutError):
        cause += " (no answer in time: the server is stopped, blocked or overloaded)"
    return DriverUnavailableError("redis", cause, fix)


def plain(exc: BaseException) -> str:
    """The server's reply without what a script's failure adds to it (`_SCRIPT_NOISE`)."""
    return _SCRIPT_NOISE.sub("", str(exc)).strip()


class MemoryFullError(StorageFullError):
    """STORAGE_FULL on Redis: what is full is the server's memory, at its `maxmemory`, not a
    disk. A subclass for its cause alone: the code, title and retry class are STORAGE_FULL's."""

    def __init__(self, detail: str, found: memory.Memory | None, url: str, fix: str) -> None:
        at = f" ({found.used_line()})" if found else ""
        to = (
            f" to {found.bigger()} (the fix: CONFIG SET maxmemory {found.bigger()})"
            if found
            else ""
        )
        JobsError.__init__(
            self,
            f"redis: the server's memory is full: it reached its maxmemory{at} and refuses "
            f"writes ({detail}); nothing of the refused write was stored. Raise maxmemory{to} "
            "and in the server's configuration file (a restart would undo it), or free memory: "
            f"{memory.prune_line(url)} deletes the settled jobs past their retention",
            fix,
            details={"driver": "redis", "where": "maxmemory"},
        )


async def memory_full(fixes: Fixes, exc: OutOfMemoryError) -> MemoryFullError:
    """The refusal of a write at `maxmemory`, its fix the line that raises the limit (the
    report's line when the server's memory cannot be read: an ACL without INFO)."""
    try:
        found = memory.Memory.of(await fixes.client.info("memory"))
    except (*UNAVAILABLE, RedisError):
        return MemoryFullError(plain(exc), None, fixes.url, fixes.report)
    return MemoryFullError(plain(exc), found, fixes.url, found.raise_line(fixes.url))


def wrong_type(exc: RedisError) -> bool:
    """A command (or a script's) refused as WRONGTYPE. Redis's error code is the reply's first
    word; Redis 6 puts a script's after "@user_script:N: ", 7 keeps it first."""
    return isinstance(exc, ResponseError) and (
        str(exc).startswith("WRONGTYPE ") or ": WRONGTYPE " in str(exc)
    )


def passes(exc: JobsError) -> bool:
    """Whether a settle is held through `exc` (see engine/drivers/holding.py)."""
    return isinstance(exc.__cause__, HELD_THROUGH)
