"""The connection: the URL checked before anything opens, the bucket bound (created once, with
the URL's replicas and storage), and every NATS or network failure turned into
`DriverUnavailableError` where it arises (chained with `from`), a write refused because the
store is full into `StorageFullError`.

    nats://host:port[,host:port...]/BUCKET?replicas=3&storage=file

One KV bucket holds everything a namespace stores; its name is the URL's path (default
`mcp_jobs`), so a test gets a fresh namespace by naming a fresh bucket.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from urllib.parse import parse_qsl

import nats.errors
import nats.js.errors
from nats.aio.client import Client
from nats.js import JetStreamContext
from nats.js.api import KeyValueConfig, StorageType
from nats.js.kv import KeyValue

from engine.driver_errors import DatabaseUrlInvalidError, DriverUnavailableError, StorageFullError
from engine.drivers.nats.max_payload import (
    HEADER_ROOM,
    README_BOUND,
    SERVER_CEILING,
    needed,
    output_fix,
    set_line,
    too_large,
)
from engine.drivers.nats.stream_limit import LIMITS, StreamFullError
from engine.drivers.urls import migrate_fix, report_fix, split_param, url_word
from engine.errors import InvalidArgumentError, JobOutputInvalidError, JobsError
from engine.shell_words import shell_word

logger = logging.getLogger("mcp_jobs.nats")

SCHEMES = ("nats", "tls")
DEFAULT_BUCKET = "mcp_jobs"
_BUCKET = re.compile(r"^[a-zA-Z0-9_-]+$")
_STORAGE = {"file": StorageType.FILE, "memory": StorageType.MEMORY}
# The URL's options, all the driver's own: nats-py takes none from the URL, so any other one
# (a misspelt `replica=3`) would be dropped without a word.
OPTIONS = ("replicas", "storage")
# JetStream's code for a replicated bucket asked of a server that is not in a cluster.
_NOT_CLUSTERED = 10074
# Failures of the server or the network, not of a request: what DRIVER_UNAVAILABLE means.
UNAVAILABLE = (nats.errors.Error, nats.js.errors.Error, asyncio.TimeoutError, OSError)
# JetStream's codes for a store with no room: 10023 the server's or account's max_file_store /
# max_mem_store reached, 10028 and 10047 its memory or storage reservation refused.
_FULL_CODES = frozenset({10023, 10028, 10047})
# A stream at its own limit with discard=new answers 10077 (its store failed) for many causes:
# only its description tells a limit apart, the server has no code of its own for it.
_STORE_FAILED = 10077
_STREAM_LIMITS = frozenset(LIMITS)
WHERE_FULL = "the JetStream store (max_file_store / max_mem_store, or the stream's max_bytes)"
# What a job's value keeps free when an input, step or output is written into it: the writes
# that follow (a claim, a nack's error and event) must still fit, or the job could never settle.
SETTLE_ROOM = 64 * 1024
# What an enqueue keeps free: as much again for the job's steps and output, which keep
# SETTLE_ROOM free themselves, so an input at the bound still runs a job with small ones.
INPUT_ROOM = 2 * SETTLE_ROOM
# Only where the value's size is not known; a fix that knows it names the max_payload to set.
RAISE_BOUND = "raise max_payload in nats-server's config (at most 64 MB)"


class TooLarge(Exception):
    """A value the server can never take in one message: refused before it is sent, never
    taken for the server being away (which would be retried without end)."""

    def __init__(self, key: str, size: int, bound: int, max_payload: int) -> None:
        super().__init__(f"{key}: {size} bytes, past {bound}")
        self.key = key
        self.size = size
        self.bound = bound
        self.max_payload = max_payload

    @property
    def wanted(self) -> int:
        """The max_payload that takes this value, with the room the write keeps free."""
        return needed(self.size, self.max_payload - self.bound - HEADER_ROOM)

    @property
    def reason(self) -> str:
        return (
            f"the job's stored value would be {self.size} bytes, past the {self.bound} bytes "
            f"this NATS server takes (its max_payload of {self.max_payload} bytes, less room "
            f"kept for the job's later writes; {README_BOUND})"
        )

    def output_refused(self, job_id: str, origin: str) -> JobOutputInvalidError:
        """JOB_OUTPUT_INVALID for a step or output (`origin`) the job's value cannot hold:
        terminal, as any output the store refuses (the same value fails every try)."""
        error = JobOutputInvalidError(job_id, origin, "$", self.reason)
        error.fix = output_fix(origin, self.wanted)
        error.details = {**(error.details or {}), "max_payload": self.wanted}
        error.__cause__ = self
        return error

    def refused(self) -> InvalidArgumentError:
        """The typed refusal of a write no caller turned into its own error."""
        wanted = self.wanted
        error = InvalidArgumentError(
            "value",
            f"{self.size} bytes for {self.key}",
            f"at most {self.bound} bytes (the NATS server's max_payload of "
            f"{self.max_payload} bytes; {README_BOUND})",
            fix=set_line(wanted) if wanted <= SERVER_CEILING else too_large("store less"),
        )
        error.details = {**(error.details or {}), "max_payload": wanted}
        return error


@dataclass(frozen=True)
class NatsUrl:
    servers: list[str]
    bucket: str
    replicas: int
    storage: str


def parse_nats_url(url: str) -> NatsUrl:
    """The servers, bucket and bucket options a URL names; DATABASE_URL_INVALID otherwise."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() not in SCHEMES:
        raise DatabaseUrlInvalidError(url, "a NATS URL starts with nats:// or tls://")
    rest, _, query = rest.partition("?")
    hosts, _, path = rest.partition("/")
    if not hosts or any(not h.rpartition("@")[2].split(":")[0] for h in hosts.split(",")):
        raise DatabaseUrlInvalidError(url, "the NATS URL names no host")
    bucket = path.strip("/") or DEFAULT_BUCKET
    if not _BUCKET.match(bucket):
        raise DatabaseUrlInvalidError(url, "the bucket after the host is letters, digits, - or _")
    options = dict(parse_qsl(query, keep_blank_values=True))
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise DatabaseUrlInvalidError(
            url,
            f"the nats driver takes no option {unknown[0][:40]!r} in the URL (it takes "
            f"{' and '.join(f'{o}=' for o in OPTIONS)})",
        )
    replicas = options.get("replicas", "1")
    storage = options.get("storage", "file")
    if not replicas.isdigit() or not 1 <= int(replicas) <= 5:
        raise DatabaseUrlInvalidError(url, "replicas= is a number from 1 to 5")
    if storage not in _STORAGE:
        raise DatabaseUrlInvalidError(url, "storage= is file or memory")
    servers = [f"{scheme}://{h}" for h in hosts.split(",")]
    return NatsUrl(servers, bucket, int(replicas), storage)


def check_nats_url(url: str) -> None:
    parse_nats_url(url)


@dataclass(frozen=True)
class Fixes:
    """The fix lines a failure on the driver's URL carries. Built from the URL the way every
    driver's are (engine.drivers.urls): a URL with a secret is named by its variable."""

    # Migrating reconnects and binds the bucket: the one command that checks the server end
    # to end.
    unavailable: str
    # A server that does not answer: `db report` says which and how (the `database_report`
    # tool through MCP), and names the migrate line when the bucket is missing.
    unreachable: str
    # report.py on the URL through the project's CLI (the `nats` CLI is seldom installed, the
    # monitoring port is off by default): what takes the store's room, or with a key added,
    # how often that key is written.
    report: str
    # The URL itself, never printed: DATABASE_URL_INVALID names only its scheme.
    url: str
    # The servers as a cause may name them (no user, password or token).
    where: str = ""

    @classmethod
    def of(cls, url: str) -> Fixes:
        return cls(
            migrate_fix(url),
            report_fix(url),
            f"mcp-jobs db nats-report --database-url {url_word(url)}",
            url,
            ", ".join(shown_server(s) for s in parse_nats_url(url).servers),
        )

    def key(self, key: str) -> str:
        """The report on one key: its value as stored now, and how often it is written."""
        return f"{self.report} {shell_word(key)}"


def storage_full(exc: BaseException) -> bool:
    """Whether `exc` is JetStream refusing a write because the store has no room left: space
    can be freed (an operator's purge, a raised limit), so it is not the server going away."""
    if not isinstance(exc, nats.js.errors.APIError):
        return False
    if exc.err_code in _FULL_CODES:
        return True
    return exc.err_code == _STORE_FAILED and (exc.description or "") in _STREAM_LIMITS


# What a try to reach a server fails with (the rest, a slow consumer say, is logged each time).
_CONNECTING = (
    OSError,
    asyncio.TimeoutError,
    nats.errors.NoServersError,
    nats.errors.UnexpectedEOF,
    nats.errors.StaleConnectionError,
)


def authorization_refused(exc: BaseException) -> bool:
    """Whether the server refused the URL's user, password or token ("Authorization
    Violation"): nats-py raises it at connect as a plain `Error`, later as
    `AuthorizationError`. Every try is refused the same way until the URL or the server's
    authorization changes."""
    if isinstance(exc, nats.errors.AuthorizationError):
        return True
    return isinstance(exc, nats.errors.Error) and "authorization violation" in str(exc).lower()


AUTHORIZATION_REFUSED = "the server refused the URL's user, password or token"


def shown_server(server: str) -> str:
    """A server of the URL as output may print it: without its user, password or token."""
    scheme, _, rest = server.partition("://")
    return f"{scheme}://{rest.rpartition('@')[2]}"


class ConnectionLog:
    """nats-py's error callbacks. Its default logs a traceback on every failed try, five a
    second while a server is away: this logs the first failure of an outage and the reconnect,
    and keeps the last failure, which names what went wrong when the first connect times out.
    Without `reconnect`, `refused_all` is set once every server has failed a try: nats-py
    would go round them again until the connect's bound. A refused authorization sets it at
    once, and is what the first connect fails with (the reset that follows it says less)."""

    def __init__(self, *, reconnect: bool = True, servers: int = 1) -> None:
        self.last: BaseException | None = None
        self.refusal: BaseException | None = None
        self.connected = False
        self.away = False
        # Set when a connection is lost; a claim reads it to spare the leases that outage let
        # run out (claims.py), and clears it.
        self.outage_seen = False
        self._reconnect = reconnect
        self._servers = servers
        self._failed_tries = 0
        self.refused_all = asyncio.Event()

    async def error(self, exc: Exception) -> None:
        self.last = exc
        if authorization_refused(exc):
            self.refusal = exc
            self.refused_all.set()
            if self.connected and not self.away:
                self.away = True
                logger.warning("NATS connection refused: %s; reconnecting", AUTHORIZATION_REFUSED)
            return
        if self.refusal is not None and not self.connected:
            return  # the server closing the session it refused: the refusal says it all
        if not isinstance(exc, _CONNECTING):
            logger.warning("NATS client error: %s: %s", type(exc).__name__, exc)
            return
        self._failed_tries += 1
        if not self._reconnect:
            if self._failed_tries >= self._servers:
                self.refused_all.set()
        elif not self.away:
            self.away = self.outage_seen = True
            # Before the first connect succeeds nothing reconnects yet: the connect fails, once
            # bounded, with what went wrong (a one-shot command's error says it).
            level = logging.WARNING if self.connected else logging.DEBUG
            logger.log(
                level, "NATS connection failed (%s: %s); reconnecting", type(exc).__name__, exc
            )

    async def reconnected(self) -> None:
        if self.away:
            self.away = False
            logger.warning("NATS connection back")


async def connect(
    servers: list[str],
    connect_timeout_s: float,
    *,
    reconnect: bool,
    log: ConnectionLog | None = None,
) -> Client:
    """A client connected to one of `servers`; the first connect is bounded (nats-py would
    retry it as long as it reconnects) and fails with the last error it met. With
    `reconnect`, it reconnects forever with a short wait: a restarted server or a lost cluster
    node is a pause, and a request sent meanwhile fails after its own timeout. Without it, the
    connect fails once every server has failed one try. `log`: the connection's log, for a
    caller that reads what it saw."""
    client = Client()
    log = log or ConnectionLog(reconnect=reconnect, servers=len(servers))
    # nats-py annotates these seconds as int; it hands them to asyncio, which takes floats.
    attempt = asyncio.ensure_future(
        client.connect(
            servers=servers,
            connect_timeout=connect_timeout_s,  # type: ignore[arg-type]
            reconnect_time_wait=0.2,  # type: ignore[arg-type]
            max_reconnect_attempts=-1 if reconnect else 0,
            allow_reconnect=reconnect,
            error_cb=log.error,
            reconnected_cb=log.reconnected,
        )
    )
    refused = asyncio.ensure_future(log.refused_all.wait())
    try:
        await asyncio.wait(
            {attempt, refused}, timeout=connect_timeout_s * 2, return_when=asyncio.FIRST_COMPLETED
        )
    except BaseException:  # this task cancelled: the connect goes with it
        attempt.cancel()
        raise
    finally:
        refused.cancel()
    if attempt.done() and log.refusal is None:
        attempt.result()  # a failure nats-py raised itself
        log.connected = True
        log.away = False  # a failed try before this one is no outage
        return client
    attempt.cancel()
    with contextlib.suppress(asyncio.CancelledError, *UNAVAILABLE):
        await attempt
    await client.close()
    where = ", ".join(shown_server(s) for s in servers)
    last = log.refusal or log.last
    if isinstance(last, TimeoutError) and not str(last):
        # asyncio's timeout says nothing: name whom it waited for, and how long.
        last = TimeoutError(f"no answer from {where} within {connect_timeout_s:g} s")
    if last is not None:
        raise last from None
    raise TimeoutError(f"no NATS server answered within {connect_timeout_s * 2:g} s ({where})")


async def close_client(client: Client) -> None:
    """Close `client`. Away from its server, nats-py first writes what it buffered meanwhile
    (writes whose callers have given up waiting) into the lost connection, fails there, and
    skips the rest of its teardown: those writes are dropped first, as none can land now."""
    if not client.is_connected:
        client._pending = []  # pyright: ignore[reportPrivateUsage]
        client._pending_data_size = 0  # pyright: ignore[reportPrivateUsage]
    await client.close()


async def open_bucket(
    parsed: NatsUrl, connect_timeout_s: float, log: ConnectionLog
) -> tuple[Client, JetStreamContext, KeyValue]:
    client = await connect(parsed.servers, connect_timeout_s, reconnect=True, log=log)
    try:
        js = client.jetstream(timeout=connect_timeout_s)
        return client, js, await _bucket(js, parsed)
    except BaseException:
        await client.close()  # a bucket not bound leaves no connection behind
        raise


async def _bucket(js: JetStreamContext, parsed: NatsUrl) -> KeyValue:
    try:
        kv = await js.key_value(parsed.bucket)
    except nats.js.errors.BucketNotFoundError:
        # direct=False: reads go to the stream leader, so a CAS is never checked against a
        # lagging replica's copy.
        config = KeyValueConfig(
            bucket=parsed.bucket,
            history=1,
            replicas=parsed.replicas,
            storage=_STORAGE[parsed.storage],
            direct=False,
        )
        kv = await js.create_key_value(config)
    return kv


@asynccontextmanager
async def guard(fixes: Fixes) -> AsyncIterator[None]:
    """NATS or network failures raised inside come out as `DriverUnavailableError`, a
    write refused for want of room as `StorageFullError`, each with its line of `fixes`; a
    value too large for one message as INVALID_ARGUMENT (not retryable: it never fits)."""
    try:
        yield
    except TooLarge as exc:
        raise exc.refused() from exc
    except UNAVAILABLE as exc:
        if isinstance(exc, nats.errors.MaxPayloadError):
            # A value the checks before the write did not size (they size every job's).
            raise InvalidArgumentError(
                "value",
                "a value",
                f"within the NATS server's max_payload ({README_BOUND})",
                fix=RAISE_BOUND,
            ) from exc
        if authorization_refused(exc):
            url_refused = f"{AUTHORIZATION_REFUSED} ({exc})"
            raise DatabaseUrlInvalidError(
                fixes.url, url_refused, fix=fixes.unreachable, answered=True
            ) from exc
        if isinstance(exc, nats.js.errors.APIError) and exc.err_code == _NOT_CLUSTERED:
            raise not_clustered(fixes.url, exc) from exc
        if storage_full(exc):
            description = getattr(exc, "description", None) or str(exc)
            detail = f"{type(exc).__name__}: {description}"
            limit = LIMITS.get(description)
            if limit is not None:
                bucket = parse_nats_url(fixes.url).bucket
                raise StreamFullError(bucket, limit, detail, fixes.report) from exc
            raise StorageFullError("nats", WHERE_FULL, detail, fixes.report) from exc
        cause = f"{type(exc).__name__}: {exc}"
        if isinstance(exc, nats.errors.TimeoutError):  # a request's: "nats: timeout"
            cause += f" (no answer from {fixes.where})"
        fix = fixes.unreachable if isinstance(exc, _CONNECTING) else fixes.unavailable
        raise DriverUnavailableError("nats", cause, fix) from exc


def not_clustered(url: str, exc: nats.js.errors.APIError) -> DatabaseUrlInvalidError:
    """The bucket's creation refused because `?replicas=` above 1 needs a JetStream cluster:
    the same URL is refused the same way on this server, so it is the URL to correct."""
    replicas = parse_nats_url(url).replicas
    reason = (
        f"replicas={replicas} asks for a bucket copied to {replicas} servers of a JetStream "
        f"cluster, and this server is not in a cluster ({exc.description}): drop ?replicas= "
        "to keep the jobs on this one server, or point the URL at the cluster's servers"
    )
    single = migrate_fix(split_param(url, "replicas")[0])
    return DatabaseUrlInvalidError(url, reason, fix=single, answered=True)


def held_through(exc: JobsError) -> bool:
    """Whether a settle is held through `exc` (engine/drivers/holding.py): the server away,
    or its store full (an operator frees room; given up, the finished job would run again).
    Not a refusal, and not a key contended beyond reason."""
    return isinstance(exc, (DriverUnavailableError, StorageFullError)) and isinstance(
        exc.__cause__, UNAVAILABLE
    )
