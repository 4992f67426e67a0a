"""Server and CLI settings: flags first, then `MCP_JOBS_*` environment variables, then defaults."""

from __future__ import annotations

import argparse
import difflib
import ipaddress
import math
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from urllib.parse import urlsplit

from engine import bounds
from engine.backfill.gate import DEFAULT_ENVIRONMENT as DEFAULT_ENVIRONMENT
from engine.backfill.gate import ENVIRONMENT_ENV as ENVIRONMENT_ENV
from engine.drivers import resolve_url
from engine.drivers.urls import redact
from engine.errors import LEFT_OUT, InvalidArgumentError
from engine.retention import duration_text_ms
from engine.shell_words import shell_word
from mcp_jobs.errors import (
    HttpSettingInvalidError,
    OAuthConflictError,
    OAuthSettingInvalidError,
    TokenConflictError,
    TokenFileError,
    token_file_line,
)

APP_ENV = "MCP_JOBS_APP"
# MCP_JOBS_ENV and its default (imported above) have one home, beside the rule for its value.
TOKEN_ENV = "MCP_JOBS_TOKEN"
TOKEN_FILE_ENV = "MCP_JOBS_TOKEN_FILE"
SESSION_IDLE_ENV = "MCP_JOBS_SESSION_IDLE_SECONDS"
MAX_SESSIONS_ENV = "MCP_JOBS_MAX_SESSIONS"
ALLOWED_HOSTS_ENV = "MCP_JOBS_ALLOWED_HOSTS"
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
# An HTTP session nobody has sent a request for this long is closed (its id then answers 404):
# a client that went away without DELETE must not hold server memory forever.
DEFAULT_SESSION_IDLE_SECONDS = 30 * 60.0
# The longest idle period taken: a session is server memory and one of --max-sessions slots, and
# the 503 past the bound tells its client to retry after this long.
MAX_SESSION_IDLE_SECONDS = 7 * 24 * 3600.0
# Live HTTP sessions at once; one more is refused with 503 until one ends or expires.
DEFAULT_MAX_SESSIONS = 1000
OAUTH_ISSUER_ENV = "MCP_JOBS_OAUTH_ISSUER"
OAUTH_AUDIENCE_ENV = "MCP_JOBS_OAUTH_AUDIENCE"
OAUTH_JWKS_URL_ENV = "MCP_JOBS_OAUTH_JWKS_URL"
OAUTH_RESOURCE_URL_ENV = "MCP_JOBS_OAUTH_RESOURCE_URL"
OAUTH_ALGORITHMS_ENV = "MCP_JOBS_OAUTH_ALGORITHMS"
OAUTH_TENANT_CLAIM_ENV = "MCP_JOBS_OAUTH_TENANT_CLAIM"
# Asymmetric only: the server holds the issuer's public keys, never a shared secret, so an
# HS* token (or `none`) is refused whatever its header says.
OAUTH_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384")
DEFAULT_OAUTH_ALGORITHMS = ("RS256", "ES256")
DEFAULT_OAUTH_TENANT_CLAIM = "tenant"


@dataclass(frozen=True)
class OAuthSettings:
    """Where access tokens come from (`serve --transport http --oauth-issuer URL`). The JWKS
    URL is found in the issuer's metadata at start unless given."""

    issuer: str
    # The MCP endpoint's public URL: what RFC 9728 metadata names and the default audience.
    resource_url: str
    audience: str
    jwks_url: str | None = None
    algorithms: tuple[str, ...] = DEFAULT_OAUTH_ALGORITHMS
    tenant_claim: str = DEFAULT_OAUTH_TENANT_CLAIM


# Items an answer that grows with the installation lists when the caller gives no `limit`
# (queue_stats' queues, diagnose_queue's findings, describe_jobs' descriptors): a few tens of KB
# at 2,000 queues; the rest is counted (mcp_jobs/operations/answer_bounds.py).
SHOWN = 50


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

    @property
    def answer_after_eof_seconds(self) -> float:
        """At the end of stdin, how long requests in hand have to be answered: past the longest
        bounded call (a wait at its cap)."""
        return self.max_wait_seconds + 10


@dataclass(frozen=True)
class Settings:
    database_url: str | None = None
    apps: tuple[str, ...] = ()
    environment: str = DEFAULT_ENVIRONMENT
    read_only: bool = False
    tenant: str | None = None
    # `tenant` is an OAuth access token's claim (the request's, `oauth_grants.request_settings`),
    # not the server's --tenant: refusals then say it is the token that pins the caller.
    tenant_from_token: bool = False
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    token: str | None = None
    # Where `token` was read from, for logs and fix lines (never the token itself).
    token_source: str = TOKEN_ENV
    session_idle_seconds: float = DEFAULT_SESSION_IDLE_SECONDS
    max_sessions: int = DEFAULT_MAX_SESSIONS
    # Host names beyond this machine's that a loopback server answers (a TLS proxy in front
    # that forwards the Host it was reached by); the rest are refused against DNS rebinding.
    allowed_hosts: tuple[str, ...] = ()
    limits: ServerLimits = field(default_factory=ServerLimits)
    # Set: HTTP takes OAuth access tokens (JWTs) instead of the static token.
    oauth: OAuthSettings | None = None
    # Writes through MCP (run_backfill, prune_history) ask the person first (server.confirm);
    # off only by `serve --confirm-writes off` / MCP_JOBS_CONFIRM_WRITES=off.
    confirm_writes: bool = True
    # How long a dry run's confirm token stays good (clients without elicitation).
    confirm_ttl_seconds: float = 600.0

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
        # As set, even empty: what uses it (engine.backfill.resolve_environment) refuses a
        # value that is no environment name, and the CLI refuses it before any command runs.
        environment=os.environ.get(ENVIRONMENT_ENV, DEFAULT_ENVIRONMENT),
        read_only=read_only,
        tenant=tenant or None,
        host=host or DEFAULT_HOST,
        port=port if port is not None else DEFAULT_PORT,
        # Whitespace round a token is what no Authorization header carries (HTTP strips it), and
        # a blank one is none: HTTP then refuses to start without one (HTTP_TOKEN_REQUIRED).
        token=os.environ.get(TOKEN_ENV, "").strip() or None,
    )


def http_settings(
    settings: Settings,
    *,
    token_file: str | None = None,
    session_idle_seconds: float | None = None,
    max_sessions: int | None = None,
    oauth: Mapping[str, str | None] | None = None,
    allowed_hosts: Sequence[str] | None = None,
) -> Settings:
    """`settings` for `serve --transport http`: each flag given here wins over its `MCP_JOBS_*`
    variable, and the token is read from its file when one is named. Read only when serving
    HTTP, so a bad value here never breaks another command. `oauth` holds the `--oauth-*` flags
    by name (`issuer`, `audience`, `jwks_url`, `resource_url`, `algorithms`, `tenant_claim`);
    `allowed_hosts` the `--allowed-host` flags."""
    token_file_flag = token_file is not None
    token_file = token_file or os.environ.get(TOKEN_FILE_ENV) or None
    token, source = settings.token, TOKEN_ENV
    if token_file is not None:
        if token is not None:
            raise TokenConflictError(token_file)
        token, source = read_token_file(token_file), token_file
    if session_idle_seconds is None:
        session_idle_seconds = _env_number(
            SESSION_IDLE_ENV, DEFAULT_SESSION_IDLE_SECONDS, float, MAX_SESSION_IDLE_SECONDS
        )
    else:
        _check_session_idle(session_idle_seconds)
    if max_sessions is None:
        max_sessions = int(_env_number(MAX_SESSIONS_ENV, DEFAULT_MAX_SESSIONS, int))
    host = bind_host(settings.host, "--host", "mcp-jobs serve --transport http")
    # The SDK and the socket refuse a port out of range only deep in their start (a traceback,
    # or a port modulo 65536): refused here, with the command at the nearest port.
    bounds.port("port", settings.port)
    oauth_settings = read_oauth(oauth or {}, host, settings.port) or settings.oauth
    if oauth_settings is not None and token is not None:
        raise OAuthConflictError(source, _conflict_fix(source, token_file_flag=token_file_flag))
    return replace(
        settings,
        host=host,
        token=token,
        token_source=source,
        session_idle_seconds=session_idle_seconds,
        max_sessions=max_sessions,
        allowed_hosts=read_allowed_hosts(allowed_hosts),
        oauth=oauth_settings,
    )


def bind_host(value: str, flag: str, command: str) -> str:
    """The address `flag` of `command` gives, as the socket takes it (`[::1]` as URLs write it
    is ::1); anything but an IP address or host name is refused, mended to loopback."""
    host = value.strip("[]")
    if not _is_host(host):
        raise HttpSettingInvalidError(
            flag,
            value,
            "an IP address or a host name (letters, digits, - and .)",
            f"{command} {flag} {DEFAULT_HOST}",
            flag=flag,
            nearest=DEFAULT_HOST,
        )
    return host


def add_allowed_host(parser: argparse.ArgumentParser) -> None:
    """`--allowed-host`, read by `read_allowed_hosts`: for `serve` and `dashboard` alike."""
    parser.add_argument(
        "--allowed-host",
        action="append",
        metavar="NAME",
        help="a Host name a proxy in front forwards, answered besides this machine's (repeat "
        f"for more; default: ${ALLOWED_HOSTS_ENV}, comma-separated)",
    )


def read_allowed_hosts(flags: Sequence[str] | None) -> tuple[str, ...]:
    """The `--allowed-host` names, else MCP_JOBS_ALLOWED_HOSTS (comma-separated): each a host
    name or IP address, without a port (any port is allowed). A variable that is set yet names
    no host (`,,`, blanks) is refused: it was meant to name one."""
    if flags:
        return tuple(dict.fromkeys(_allowed_host(value, flagged=True) for value in flags))
    raw = os.environ.get(ALLOWED_HOSTS_ENV, "")
    # Empty entries are skipped: a trailing comma, or `a, ,b`, names the hosts it names.
    values = [value.strip() for value in raw.split(",") if value.strip()]
    if raw and not values:
        raise HttpSettingInvalidError(
            ALLOWED_HOSTS_ENV,
            raw,
            "a host name or IP address, or several by commas (unset: no name beyond this "
            "machine's)",
            f"unset {ALLOWED_HOSTS_ENV}",
        )
    names: list[str] = []
    for value in values:
        try:
            names.append(_allowed_host(value, flagged=False))
        except HttpSettingInvalidError as exc:
            # The whole list mended, so the export keeps the names that were right.
            mended = ",".join(dict.fromkeys(_nearest_host(v.lower()) for v in values))
            raise exc.with_fix(f"export {ALLOWED_HOSTS_ENV}={shell_word(mended)}") from None
    return tuple(dict.fromkeys(names))


def _allowed_host(value: str, *, flagged: bool) -> str:
    """`value` as an allowed name (lowercase), or HttpSettingInvalidError for a URL, a port, a
    path, or nothing."""
    name = value.strip().lower()
    if _is_host(name.strip("[]")):
        return name
    near = _nearest_host(name)
    expected = "a host name or IP address, without a scheme or port"
    if flagged:
        fix = f"mcp-jobs serve --transport http --allowed-host {near}"
        raise HttpSettingInvalidError(
            "--allowed-host", value, expected, fix, flag="--allowed-host", nearest=near
        )
    raise HttpSettingInvalidError(
        ALLOWED_HOSTS_ENV, value, expected, f"export {ALLOWED_HOSTS_ENV}={near}"
    )


def _nearest_host(name: str) -> str:
    """The host a refused allowed name stands for: a URL's host, without port or path."""
    if _is_host(name.strip("[]")):
        return name
    try:  # read as a URL, or as one without its scheme (`host:8080/path`)
        host = urlsplit(name if "//" in name else f"//{name}").hostname or ""
    except ValueError:
        host = ""
    if host and _is_host(host):
        return f"[{host}]" if ":" in host else host
    near = re.sub(r"[^a-z0-9.-]", "", name.split("//")[-1].split(":")[0].split("/")[0])
    return near.strip(".-") or "localhost"


def _conflict_fix(source: str, *, token_file_flag: bool) -> str:
    """Unset whichever side came from the environment; two flags leave only the help."""
    if source == TOKEN_ENV:
        return f"unset {TOKEN_ENV}"
    if not token_file_flag:
        return f"unset {TOKEN_FILE_ENV}"
    if os.environ.get(OAUTH_ISSUER_ENV):
        return f"unset {OAUTH_ISSUER_ENV}"
    return "mcp-jobs serve --help"


_OAUTH_ENV = {
    "issuer": OAUTH_ISSUER_ENV,
    "audience": OAUTH_AUDIENCE_ENV,
    "jwks_url": OAUTH_JWKS_URL_ENV,
    "resource_url": OAUTH_RESOURCE_URL_ENV,
    "algorithms": OAUTH_ALGORITHMS_ENV,
    "tenant_claim": OAUTH_TENANT_CLAIM_ENV,
}
# The OAuth settings by name, as `read_oauth`'s flags are keyed (`jwks_url`).
OAUTH_SETTINGS = tuple(_OAUTH_ENV)


def oauth_flag(name: str) -> str:
    """The `serve` flag of the OAuth setting `name` (`jwks_url`: `--oauth-jwks-url`)."""
    return f"--oauth-{name.replace('_', '-')}"


_HOST_LABEL = re.compile(r"(?!-)[A-Za-z0-9-]{1,63}(?<!-)")


def _is_host(host: str) -> bool:
    """An IP address, or a name DNS could hold: URLs built on it (the resource URL) and the
    socket then take it."""
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        pass
    labels = host.removesuffix(".").split(".")
    return 0 < len(host) <= 253 and all(_HOST_LABEL.fullmatch(label) for label in labels)


def read_oauth(flags: Mapping[str, str | None], host: str, port: int) -> OAuthSettings | None:
    """The OAuth settings from the `--oauth-*` flags, else `MCP_JOBS_OAUTH_*`; None when none is
    given (OAuth off). A blank setting, or any other given without an issuer, is refused
    (`_check_oauth_set`): nothing would read it."""
    _check_oauth_set(flags)
    given = {
        name: (flags.get(name) or os.environ.get(env) or "").strip()
        for name, env in _OAUTH_ENV.items()
    }
    issuer = given["issuer"]
    if not issuer:
        return None

    def flag(name: str) -> str | None:
        """The flag that gave `name`'s value, when a flag did (it wins over the variable)."""
        return oauth_flag(name) if flags.get(name) else None

    _check_url(OAUTH_ISSUER_ENV, issuer, flag("issuer"))
    shown = f"[{host}]" if ":" in host else host
    resource_url = given["resource_url"] or f"http://{shown}:{port}/mcp"
    _check_url(OAUTH_RESOURCE_URL_ENV, resource_url, flag("resource_url"))
    if given["jwks_url"]:
        _check_url(OAUTH_JWKS_URL_ENV, given["jwks_url"], flag("jwks_url"))
    algorithms: tuple[str, ...] = DEFAULT_OAUTH_ALGORITHMS
    if given["algorithms"]:
        algorithms = tuple(a.strip() for a in given["algorithms"].split(",") if a.strip())
        unknown = [a for a in algorithms if a not in OAUTH_ALGORITHMS]
        if unknown or not algorithms:
            known = [a for a in algorithms if a in OAUTH_ALGORITHMS] or DEFAULT_OAUTH_ALGORITHMS
            raise OAuthSettingInvalidError(
                flag("algorithms") or OAUTH_ALGORITHMS_ENV,
                given["algorithms"],
                f"a comma-separated list of {', '.join(OAUTH_ALGORITHMS)}",
                f"export {OAUTH_ALGORITHMS_ENV}={','.join(known)}",
                flag=flag("algorithms"),
                nearest=",".join(known),
            )
    return OAuthSettings(
        issuer=issuer,
        resource_url=resource_url,
        audience=given["audience"] or resource_url,
        jwks_url=given["jwks_url"] or None,
        algorithms=algorithms,
        tenant_claim=given["tenant_claim"] or DEFAULT_OAUTH_TENANT_CLAIM,
    )


# What a blank OAuth setting is refused with: set, it was meant to say something, and read as
# unset it turned OAuth off (the issuer) or took a default without a word.
_OAUTH_BLANK = "a value (a blank one was read as unset: OAuth off for the issuer, else the default)"


def _check_oauth_set(flags: Mapping[str, str | None]) -> None:
    """Each OAuth setting given (flag or variable) says something, and none is given without an
    issuer: without one OAuth is off and the setting would be read by nothing."""
    for name, env in _OAUTH_ENV.items():
        typed = flags.get(name)
        if typed is not None and not typed.strip():
            raise InvalidArgumentError(oauth_flag(name), typed, _OAUTH_BLANK, nearest=LEFT_OUT)
        raw = os.environ.get(env)
        if typed is None and raw is not None and not raw.strip():
            raise OAuthSettingInvalidError(env, raw, _OAUTH_BLANK, f"unset {env}")
    if flags.get("issuer") or os.environ.get(OAUTH_ISSUER_ENV):
        return
    for name, env in _OAUTH_ENV.items():
        if flags.get(name):
            without = _OAUTH_WITHOUT_ISSUER.format(oauth_flag("issuer"))
            raise InvalidArgumentError(oauth_flag(name), flags[name], without, nearest=LEFT_OUT)
        if os.environ.get(env):
            raise OAuthSettingInvalidError(
                env,
                os.environ[env],
                _OAUTH_WITHOUT_ISSUER.format(OAUTH_ISSUER_ENV),
                f"unset {env}",
            )


_OAUTH_WITHOUT_ISSUER = "given only with {}: without an issuer OAuth is off and nothing reads it"


def _check_url(name: str, value: str, flag: str | None) -> None:
    """https, or plain http to this machine only: keys and tokens must not cross a network in
    clear."""
    try:
        parts = urlsplit(value)
        host = parts.hostname or ""
    except ValueError:  # an unbalanced [ or a port that is no number
        parts, host = urlsplit(""), ""
    loopback = host == "localhost" or host.startswith("127.") or host == "::1"
    if (parts.scheme == "https" and host) or (parts.scheme == "http" and loopback):
        return
    nearest = _nearest_https(value, host, parts.path, name)
    raise OAuthSettingInvalidError(
        flag or name,
        value,
        "an https:// URL (plain http only to localhost)",
        f"export {name}={shell_word(nearest)}",
        flag=flag,
        nearest=nearest,
    )


# What an OAuth URL setting is, written where a refused value names no host to mend it with.
_URL_SLOTS = {
    OAUTH_ISSUER_ENV: "<issuer URL>",
    OAUTH_RESOURCE_URL_ENV: "<public MCP URL>",
    OAUTH_JWKS_URL_ENV: "<JWKS URL>",
}


def _nearest_https(value: str, host: str, path: str, name: str) -> str:
    """The https URL a refused OAuth `value` stands for: its host and path over https; a value
    without a scheme read as host and path when that host has a dot (`auth.example.com/x`);
    else a slot saying what to put there, never a guessed host glued to the text."""
    if not host and "://" not in value:
        guessed = urlsplit(f"https://{value.strip()}")
        try:
            host, path = guessed.hostname or "", guessed.path
        except ValueError:
            host = ""
        if "." not in host.strip(".") or not _is_host(host):
            return _URL_SLOTS.get(name, "<https URL>")
    if not host:
        return _URL_SLOTS.get(name, "<https URL>")
    return f"https://{host}{path}"


def token_file_exposed(path: str) -> int | None:
    """The permission bits of token file `path` that let its group or others at it, None when
    only its owner can (or it cannot be read: `read_token_file` says so)."""
    try:
        mode = os.stat(path).st_mode & 0o777
    except OSError:
        return None
    return mode if mode & 0o077 else None


def read_token_file(path: str) -> str:
    """The token a file holds, without the newline the line that writes one leaves."""
    fix = token_file_line(path)
    try:
        token = Path(path).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise TokenFileError(path, reason, fix) from exc
    if not token:
        raise TokenFileError(path, "the file is empty", fix)
    return token


def seconds_in(text: str) -> float | None:
    """The seconds a `*-seconds` flag or setting's text gives: a number as `float` reads it
    (90, 0.5, 1e3), or a duration as MCP's `*_seconds` arguments read one ("30m", "7d":
    `engine.retention.duration_text_ms`); None for anything else. Not checked for range."""
    try:
        return float(text)
    except ValueError:
        ms = duration_text_ms(text)
        return None if ms is None else ms / 1000


def _check_session_idle(seconds: float) -> None:
    """`--session-idle-seconds` (the parser took it as a positive number) at most
    `MAX_SESSION_IDLE_SECONDS`: refused past it, the command mended to the bound."""
    if seconds <= MAX_SESSION_IDLE_SECONDS:
        return
    bound = f"{MAX_SESSION_IDLE_SECONDS:g}"
    raise HttpSettingInvalidError(
        "--session-idle-seconds",
        f"{seconds:.15g}",
        f"a number of seconds up to {bound} (7d)",
        f"export {SESSION_IDLE_ENV}={bound}",
        flag="--session-idle-seconds",
        nearest=bound,
        typed=seconds,
    )


def _env_number(
    name: str, default: float, kind: type[float] | type[int], maximum: float = math.inf
) -> float:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    # A seconds setting reads as its `*-seconds` flag does: a number or a duration ("30m").
    if kind is float:
        value = seconds_in(raw) or 0.0
        expected = "a positive number of seconds, or a duration (30m, 7d)"
    else:
        try:
            value = kind(raw)
        except ValueError:
            value = 0
        expected = "a positive whole number"
    if not (math.isfinite(value) and value > 0):
        raise HttpSettingInvalidError(name, raw, expected, f"export {name}={default:g}")
    if value > maximum:
        raise HttpSettingInvalidError(
            name, raw, f"{expected}, up to {maximum:g}", f"export {name}={maximum:g}"
        )
    return value


# Every variable README's *Configuration* documents, whichever module reads it: what a slip of
# the keys is measured against.
SETTING_VARIABLES = (
    "MCP_JOBS_DATABASE_URL",
    APP_ENV,
    ENVIRONMENT_ENV,
    TOKEN_ENV,
    TOKEN_FILE_ENV,
    SESSION_IDLE_ENV,
    MAX_SESSIONS_ENV,
    ALLOWED_HOSTS_ENV,
    "MCP_JOBS_CONFIRM_WRITES",
    "MCP_JOBS_CONFIRM_TTL_SECONDS",
    OAUTH_ISSUER_ENV,
    OAUTH_AUDIENCE_ENV,
    OAUTH_JWKS_URL_ENV,
    OAUTH_RESOURCE_URL_ENV,
    OAUTH_ALGORITHMS_ENV,
    OAUTH_TENANT_CLAIM_ENV,
    "MCP_JOBS_APP_VERSION",
    "MCP_JOBS_MAX_PAYLOAD_BYTES",
    "MCP_JOBS_RETAIN_DONE",
    "MCP_JOBS_RETAIN_FAILED",
    "MCP_JOBS_RETAIN_DEAD",
    "MCP_JOBS_RETAIN_CANCELLED",
    "MCP_JOBS_RETAIN_AUDIT",
    "MCP_JOBS_PRUNE",
    "MCP_JOBS_PRUNE_EVERY",
    "MCP_JOBS_EVENT_LOOP",
    "MCP_JOBS_INCIDENT_DIR",
)
# How alike a variable's name must be to a setting's to be read as a slip of it: one letter
# dropped, doubled or swapped in MCP_JOBS_DATABASE_URL is 0.98; the suite's own
# MCP_JOBS_TEST_* and MCP_JOBS_BENCH_* names stay well under.
_NEAR_SETTING = 0.9


def tenant_variable(environ: Mapping[str, str]) -> InvalidArgumentError | None:
    """A variable of ours that names a tenant (`MCP_JOBS_TENANT_ID=acme`), else None. No
    variable pins one: only `--tenant` does, so an operator who set one to pin a shell acted on
    every tenant's jobs, and nothing said so."""
    for name in sorted(environ):
        words = name.upper()
        if name in SETTING_VARIABLES or not words.startswith("MCP_JOBS") or "TENANT" not in words:
            continue
        value = environ[name]
        tenant = shell_word(value) if value.strip() else "TENANT"
        return InvalidArgumentError(
            name,
            value,
            "unset: no variable pins a tenant (only --tenant does), so this command would act "
            f"on every tenant's jobs; pin a command that reads or acts on jobs with --tenant "
            f"{tenant} (`mcp-jobs serve --tenant {tenant}` for a server; a worker serves every "
            "tenant)",
            fix=f"unset {name}",
        )
    return None


def misspelt_setting(environ: Mapping[str, str]) -> InvalidArgumentError | None:
    """A variable set in `environ` that is a slip of the keys for a setting left unset
    (`MCP_JOBS_DATABSE_URL`), else None. Read as unset, the setting's default ran instead
    (for the URL, a new empty SQLite file here), and nothing said so."""
    for name in sorted(environ):
        if name in SETTING_VARIABLES or "JOB" not in name.upper():
            continue
        near = difflib.get_close_matches(name, SETTING_VARIABLES, n=1, cutoff=_NEAR_SETTING)
        if not near or near[0] in environ:
            continue
        meant = near[0]
        # The value is never echoed whole: a URL may carry a password.
        shown = redact(environ[name]) if "://" in environ[name] else environ[name]
        return InvalidArgumentError(
            name,
            shown,
            f"a setting of mcp-jobs; {name} is none (meant {meant}?), and {meant}, unset, "
            "takes its default",
            fix=f'export {meant}="${name}" && unset {name}',
        )
    return None
