"""Checks on a database URL, made before any connection is attempted.

A URL the driver could never use is `DatabaseUrlInvalidError` (DATABASE_URL_INVALID) with the
reason, at `connect()`: not a ValueError from deep inside the database library, and not "cannot
reach the server" (retryable) for a port that is not a number. A reason never quotes the URL or
any part of it: the URL may carry a password.
"""

from __future__ import annotations

import difflib
import json
import os
import re
from collections.abc import Collection
from typing import NamedTuple
from urllib.parse import parse_qs, parse_qsl, quote_plus, unquote_plus, urlsplit, urlunsplit

from engine.driver_errors import DatabaseUrlInvalidError
from engine.errors import InvalidArgumentError
from engine.shell_words import shell_word

_BAD_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")
_IPV6_HOST = re.compile(r"\[[^\]]+\](?::(?P<port>.*))?")
# The sslmode values libpq (and asyncpg) accept.
_SSL_MODES = ("disable", "allow", "prefer", "require", "verify-ca", "verify-full")
_SQLITE_FORMS = "sqlite:///relative/jobs.db or sqlite:////absolute/jobs.db"
# `postgresql://…?schema=NAME`: the PostgreSQL schema the tables live in, so that the CLI, the
# server and every fix line reach an install outside the default one. asyncpg never sees it.
SCHEMA_PARAM = "schema"
# ≤ 58 characters: the wake-up channel "<schema>_wake" must fit PostgreSQL's 63-byte names.
SCHEMA_MAX = 58
SCHEMA_NAME = re.compile(rf"[a-z_][a-z0-9_]{{0,{SCHEMA_MAX - 1}}}")
SCHEMA_NAME_RULE = "at most 58 lowercase letters, digits and _ (not starting with a digit)"


def sqlite_path(url: str) -> str:
    """`sqlite:///rel/jobs.db` is relative to the working directory, `sqlite:////abs/jobs.db`
    absolute (the SQLAlchemy convention); `sqlite://:memory:` is refused (not durable)."""
    rest = url[len("sqlite://") :]
    if not rest.startswith("/") or len(rest) < 2:
        raise DatabaseUrlInvalidError(url, reason=f"it names no file; write {_SQLITE_FORMS}")
    path = rest[1:]
    # Read as part of the path, `?mode=ro` or `#x` made a file of that name: refused instead.
    path, question, query = path.partition("?")
    path, hash_mark, _ = path.partition("#")
    if question and not hash_mark:
        option = _key(query.partition("#")[0].split("&")[0])
        named = f": {json.dumps(option[:40])} is not one it takes" if option else ""
        reason = f"the sqlite driver takes no option in the URL{named}; write {_SQLITE_FORMS}"
        raise DatabaseUrlInvalidError(url, reason=reason)
    if hash_mark:
        reason = f"the sqlite driver takes no #fragment after the path; write {_SQLITE_FORMS}"
        raise DatabaseUrlInvalidError(url, reason=reason)
    if "\x00" in path:
        raise DatabaseUrlInvalidError(url, reason="the path holds a NUL character")
    if path.endswith("/"):
        raise DatabaseUrlInvalidError(
            url, reason=f"the path names a directory, not a file; write {_SQLITE_FORMS}"
        )
    return path


# How alike a scheme must be to a registered one to be read as it (`postgress`, `sqllite`).
_NEAR_SCHEME = 0.75


def slashes_missing(url: str, schemes: Collection[str]) -> str | None:
    """The registered scheme `url` begins with when no // follows its colon (`sqlite:jobs.db`),
    or that `url` is alone (`memory`), else None: either reads as no scheme at all."""
    head, _, _ = url.partition(":")
    if url.startswith(f"{head}://") or head.lower() not in schemes:
        return None
    return head.lower()


def meant_url(url: str, schemes: Collection[str]) -> str | None:
    """The URL `url` plainly stands for, or None: a misspelt scheme (`postgress://`) as the
    registered one nearest, `sqlite:` without its slashes, a sqlite URL without the options or
    fragment it does not take, a Redis URL without the options redis-py cannot use (a misspelt
    `?prefx=` as `?prefix=`, a database that is no number as 0), a NATS URL whose `?bucket=`
    names the bucket its path holds and whose bucket has no dot, a PostgreSQL URL written as
    its refusal asks (`_postgres_mended`): never an option dropped that would point at another
    deployment's jobs, but a `?schema=` no name can be read from (`;;`), which names no install,
    as the default schema of the same database."""
    head, sep, rest = url.partition("://")
    if not sep:
        path = url.partition(":")[2]
        return f"sqlite:///{path}" if slashes_missing(url, schemes) == "sqlite" and path else None
    scheme = head.lower()
    if scheme not in schemes:
        near = difflib.get_close_matches(scheme, sorted(schemes), n=1, cutoff=_NEAR_SCHEME)
        return f"{near[0]}://{rest}" if near else None
    if scheme == "sqlite":
        return _sqlite_mended(url, rest)
    if scheme in ("redis", "rediss"):
        kept = redis_kept(url) if redis_url_problem(url) is not None else url
        mended = None if kept is None else _redis_db_mended(kept)
        return mended if mended != url else None
    if scheme in ("postgres", "postgresql") and postgres_url_problem(url) is not None:
        return _postgres_mended(url)
    if scheme in ("nats", "tls"):
        kept = nats_kept(url) if nats_url_problem(url) is not None else url
        mended = _nats_bucket_mended(kept)
        return mended if mended != url and nats_url_problem(mended) is None else None
    return None


def _redis_db_mended(url: str) -> str:
    """`url` with the default database (0) where what follows the host is no number (`/abc`,
    `/0/extra`): a Redis database is only ever a number."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    db = parts.path.strip("/")
    return url if not db or db.isdigit() else urlunsplit(parts._replace(path="/0"))


# A KV bucket's name: what nats-server takes (engine/drivers/nats/connection.py `_BUCKET`).
_NATS_BUCKET = re.compile(r"[A-Za-z0-9_-]+")


def _nats_bucket_mended(url: str) -> str:
    """`url` with each character of its bucket that no bucket name has (`jobs.prod`) as `_`."""
    head, sep, query = url.partition("?")
    _hosts, slash, bucket = head.partition("://")[2].partition("/")
    name = bucket.strip("/")
    if not slash or not name or _NATS_BUCKET.fullmatch(name):
        return url
    fixed = re.sub(r"[^A-Za-z0-9_-]", "_", name)
    return f"{head[: len(head) - len(bucket)]}{fixed}{sep}{query}"


def _sqlite_mended(url: str, rest: str) -> str | None:
    """A sqlite URL without the options or fragment it does not take, and with the slash that
    makes its path one (`sqlite://jobs.db` read `jobs.db` as a host): None where that is no
    file's URL either (`sqlite://:memory:`, a directory) or changes nothing."""
    path = re.split(r"[?#]", rest, maxsplit=1)[0]
    if path == ":memory:":
        return None  # not durable: refused for that, not for its form
    mended = "sqlite://" + (path if path.startswith("/") else "/" + path)
    try:
        sqlite_path(mended)
    except DatabaseUrlInvalidError:
        return None
    return mended if mended != url else None


# How alike a refused sslmode must be to one libpq takes to be read as it (`requre`).
_NEAR_SSL_MODE = 0.75


def _postgres_mended(url: str) -> str | None:
    """`url` written as its refusal asks (`_postgres_text_mended`), with its options written as
    taken (`_postgres_options_mended`), when that is all that was wrong; else None. A port, a
    host or an sslmode is never guessed: another server may answer there. Nor is a password
    mended: a fix prints none, so the correction must say what to write in it."""
    try:
        mended = _postgres_options_mended(_postgres_text_mended(url))
        if urlsplit(mended).password != urlsplit(url).password:
            return None
    except ValueError:  # no URL at all: nothing is plainly meant
        return None
    return mended if postgres_url_problem(mended) is None else None


def _postgres_text_mended(url: str) -> str:
    """`url` without the whitespace around it (a line read from a file), a space in it as %20,
    a % that begins no escape as %25, and an @ of its user name or password as %40: the host
    follows the last @, where libpq reads it (asyncpg would read it after the first)."""
    url = _BAD_ESCAPE.sub("%25", url.strip().replace(" ", "%20"))
    scheme, sep, rest = url.partition("://")
    netloc = re.split(r"[/?#]", rest, maxsplit=1)[0]
    userinfo, _, hosts = netloc.rpartition("@")
    if not sep or "@" not in userinfo:
        return url
    return f"{scheme}://{userinfo.replace('@', '%40')}@{hosts}{rest[len(netloc) :]}"


def _postgres_options_mended(url: str) -> str:
    """`url` with an sslmode that plainly names one libpq takes (`requre`, `REQUIRE`,
    `verify_full`), a schema no name may be (`App-1`, `a;drop`, `1app`: `schema_meant`) or
    under a misspelt key (`?shema=`), written as taken; an option with no value (`?schema=`,
    `?sslmode`, `?x`) and an empty pair (`&&`) left out, its default taken; and a schema given
    twice over given once. No mode is guessed, nor one of two schemas named."""
    parts = urlsplit(url)
    pairs = parts.query.split("&")
    for n, pair in enumerate(pairs):
        key, eq, value = pair.partition("=")
        key = _meant_option(key) or key
        if key == SCHEMA_PARAM:
            named = schema_meant(unquote_plus(value))
            pairs[n] = f"{key}={named}" if named else ""
        elif not value:
            pairs[n] = ""
        elif key == "sslmode" and value not in _SSL_MODES:
            typed = value.lower().replace("_", "-")
            near = difflib.get_close_matches(typed, _SSL_MODES, n=1, cutoff=_NEAR_SSL_MODE)
            pairs[n] = f"{key}={near[0]}" if near else f"{key}={value}"
        else:
            pairs[n] = f"{key}{eq}{value}"
    schemas = [p for p in pairs if p.startswith(f"{SCHEMA_PARAM}=")]
    if len(set(schemas)) == 1:  # the same one named twice over: said once
        pairs = _once(pairs, schemas[0])
    query = "&".join(pair for pair in pairs if pair)
    return urlunsplit(parts._replace(query=query))


def _once(pairs: list[str], pair: str) -> list[str]:
    """`pairs` with `pair` kept where it first stands, and left out where it stands again."""
    first = pairs.index(pair)
    return [p for n, p in enumerate(pairs) if p != pair or n == first]


def schema_meant(value: str) -> str:
    """The schema name `value` (a refused `?schema=`) stands for, or "" for the default schema:
    capitals as PostgreSQL folds them, each run of what a name cannot hold (`-`, `.`, `;`) as
    one `_`, a `_` before a leading digit, cut to the longest name; "" where no letter or digit
    is left (`?schema=` empty, `;;`). Never another database: that was the fix once."""
    named = re.sub(r"[^a-z0-9_]+", "_", value.lower())
    if not re.search(r"[a-z0-9]", named):
        return ""
    return ("_" + named if named[0].isdigit() else named)[:SCHEMA_MAX]


# A slip of the keys in this package's own option (`?shema=`, `?Schema=`): asyncpg would send it
# to the server as a setting, which refuses every session for it, and the report's fix is prose.
# (A slip of a libpq option, `?sslmod=`, is the server's to refuse: the report names it.)
_MEANT_OPTIONS = (SCHEMA_PARAM,)
# How alike an option's key must be to one the driver takes to be read as it (`prefx`).
_NEAR_KEY = 0.75


def _meant_option(key: str, keys: Collection[str] = _MEANT_OPTIONS) -> str | None:
    """The option of `keys` that `key` is a slip of (`shema`, `Schema`, `prefx`), or None for
    one of them itself or any other (a server setting such as `search_path`)."""
    if key in keys:
        return None
    near = difflib.get_close_matches(key.lower(), sorted(keys), n=1, cutoff=_NEAR_KEY)
    return near[0] if near else None


def slashes_reason(scheme: str) -> str:
    """Why a `scheme:` URL without its // cannot be used, with the forms it takes."""
    forms = _SQLITE_FORMS if scheme == "sqlite" else f"{scheme}://…"
    return f"a {scheme} URL begins {scheme}:// (with two slashes); write {forms}"


class UrlProblem(NamedTuple):
    """Why a PostgreSQL URL cannot be used (never quoting it: it may carry a password), and what
    to correct in it: the fix where no mend of it is certain."""

    reason: str
    correction: str


_PORT_RULE = "a number from 1 to 65535"
# A port or host out of reach of a certain mend: the default may be another server.
_PORT_CORRECTION = (
    f"write the port the PostgreSQL server listens on, {_PORT_RULE}; with none, the default "
    "5432 is used, which may be another server's"
)
_HOST_CORRECTION = (
    "write the server's host name or address before its :port, an IPv6 address in [ ] "
    "(postgresql://user@[::1]:5432/db)"
)


def check_postgres_url(url: str) -> None:
    """Raise DATABASE_URL_INVALID when `url` is a postgresql:// URL no connection could use. Its
    fix names the same server: the URL as its refusal asks it written (`meant_url`), exported,
    else what to correct in it; never another database (the default SQLite file, once)."""
    problem = _postgres_problem(url)
    if problem is None:
        return
    meant = _postgres_mended(url)
    printable = None if meant is None else printable_url(meant)
    if printable is not None:
        fix = f"export {DATABASE_URL_ENV}={shell_word(printable)}"
    else:
        fix = f"correct the database URL: {problem.correction}"
    raise DatabaseUrlInvalidError(url, reason=problem.reason, fix=fix)


def postgres_url_correction(url: str, where: str) -> str | None:
    """What to correct in `url`, given at `where` (a flag, a variable), when it is a refused
    PostgreSQL URL: the fix where no mend of it is certain (`meant_url` is None); else None."""
    if url.partition("://")[0].lower() not in ("postgres", "postgresql"):
        return None
    problem = _postgres_problem(url)
    return None if problem is None else f"correct {where}: {problem.correction}"


def postgres_url_problem(url: str) -> str | None:
    """Why `url` cannot be used, or None. Mirrors what asyncpg's DSN parser would refuse (or
    misread) later, without touching the network."""
    problem = _postgres_problem(url)
    return None if problem is None else problem.reason


def _postgres_problem(url: str) -> UrlProblem | None:
    if any(ch.isspace() or ord(ch) < 32 or ord(ch) == 127 for ch in url):
        return UrlProblem(
            "it holds a space or a control character (write a space as %20)",
            "leave out the control characters and write each space as %20",
        )
    if _BAD_ESCAPE.search(url):
        return UrlProblem(
            "a % is not followed by two hex digits (write a literal % as %25)",
            "write a literal % as %25",
        )
    try:
        parts = urlsplit(url)
    except ValueError:
        return UrlProblem(
            "it cannot be parsed as a URL (an unbalanced [ or ] around an IPv6 host?)",
            "write an IPv6 host in one pair of [ ] (postgresql://user@[::1]:5432/db)",
        )
    # asyncpg splits the user from the hosts at the FIRST '@': a second one misplaces the host.
    auth, _, hosts = parts.netloc.rpartition("@")
    if "@" in auth:
        return UrlProblem(
            "the user name or password holds an '@' (write it as %40)",
            "write an @ in the user name or password as %40",
        )
    if hosts:
        problem = _hosts_problem(hosts)
        if problem is not None:
            return problem
    if parts.query:
        return _query_problem(parts.query)
    return None


def _hosts_problem(hosts: str) -> UrlProblem | None:
    specs = hosts.split(",")
    for n, spec in enumerate(specs, 1):
        where = "the host" if len(specs) == 1 else f"host {n} of {len(specs)}"
        if spec.startswith("["):
            match = _IPV6_HOST.fullmatch(spec)
            if match is None:
                return UrlProblem(f"{where} is not a valid [IPv6 address]:port", _HOST_CORRECTION)
            port = match.group("port") or ""
        else:
            address, colon, port = spec.partition(":")
            if not address and (colon or len(specs) > 1):
                reason = f"{where} is empty (an IPv6 address goes in [ ])"
                return UrlProblem(reason, _HOST_CORRECTION)
        if port and not _is_port(port):
            reason = f"the port of {where} is not {_PORT_RULE}"
            return UrlProblem(reason, f"after the host's colon, {_PORT_CORRECTION}")
    return None


def _query_problem(query: str) -> UrlProblem | None:
    try:
        options = parse_qs(query, keep_blank_values=True, strict_parsing=True)
    except ValueError:
        return UrlProblem(
            "the query string is not key=value pairs joined by &",
            "write each option after the ? as key=value, joined by &",
        )
    for value in options.get("port", []):
        if not all(_is_port(p) for p in value.split(",")):
            reason = f"the port option is not {_PORT_RULE}"
            return UrlProblem(reason, f"as ?port=, {_PORT_CORRECTION}")
    for key in options:
        meant = _meant_option(key)
        if meant is not None:
            return UrlProblem(
                f"the URL's option {json.dumps(key[:40])} is no option it takes (meant {meant}?)",
                f"write the option as {meant}=",
            )
    modes = ", ".join(_SSL_MODES)
    for value in options.get("sslmode", []):
        if value not in _SSL_MODES:
            return UrlProblem(
                f"sslmode must be one of {modes}",
                f"write sslmode= as one of {modes} (the server's TLS rules say which it takes)",
            )
    schemas = options.get(SCHEMA_PARAM, [])
    if len(schemas) > 1:
        return UrlProblem(
            f"the {SCHEMA_PARAM} option is given more than once",
            f"give {SCHEMA_PARAM}= once, naming the schema of the install meant (those given "
            "name more than one)",
        )
    if schemas and not SCHEMA_NAME.fullmatch(schemas[0]):
        rule = f"the {SCHEMA_PARAM} option must be {SCHEMA_NAME_RULE}"
        return UrlProblem(rule, f"write {SCHEMA_PARAM}= as {SCHEMA_NAME_RULE}")
    return None


# `redis://…?prefix=NAME`: the Redis driver's own option (its key prefix); redis-py never sees it.
REDIS_PREFIX_PARAM = "prefix"


def redis_url_problem(url: str) -> str | None:
    """Why a redis:// or rediss:// URL, or a query option of it, cannot be used, or None.
    redis-py passes an option it does not parse on to its connection class: an unknown one was
    a TypeError (an INTERNAL error and a traceback) at the first command, a malformed value a
    ValueError there. Each option is tried alone, on no host, so the reason names it and never
    its value."""
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    try:
        query = urlsplit(url).query if scheme in ("redis", "rediss") else ""
    except ValueError:  # was a ValueError (INTERNAL) from the driver's own urlsplit
        return "it cannot be parsed as a URL (an unbalanced [ or ] around an IPv6 host?)"
    if not query:
        return None
    try:  # redis-py is the optional extra `redis`: without it the driver says so itself
        from redis.asyncio.connection import ConnectionPool
        from redis.exceptions import RedisError
    except ImportError:
        return None
    for key, value in parse_qsl(query, keep_blank_values=True):
        if key == REDIS_PREFIX_PARAM:
            continue
        option = urlunsplit(
            (scheme, "localhost", "/0", f"{quote_plus(key)}={quote_plus(value)}", "")
        )
        try:  # builds the connection object only: nothing is opened
            ConnectionPool.from_url(option).make_connection()  # type: ignore[no-untyped-call]
        except TypeError:
            return f"the {scheme} driver takes no option {json.dumps(key[:40])} in the URL"
        except (ValueError, RedisError):
            return f"the value of the URL's option {json.dumps(key[:40])} is not one redis-py takes"
    return None


def nats_url_problem(url: str) -> str | None:
    """Why a nats:// or tls:// URL's hosts cannot be used, or None: a port that is no number
    from 1 to 65535, an unbalanced [IPv6] host. nats-py refused each only when connecting, as
    "invalid connect url option": DRIVER_UNAVAILABLE, retryable, for a URL no retry mends."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() not in ("nats", "tls"):
        return None
    hosts = rest.partition("?")[0].partition("/")[0]
    for n, spec in enumerate(hosts.split(","), 1):
        host = spec.rpartition("@")[2]  # a user, password or token is never read here
        where = "the host" if "," not in hosts else f"host {n}"
        if host.startswith("[") or "]" in host:
            match = _IPV6_HOST.fullmatch(host)
            if match is None:
                return f"{where} is not a valid [IPv6 address]:port"
            port = match.group("port") or ""
        else:
            port = host.partition(":")[2]
        if port and not _is_port(port):
            return f"the port of {where} is not a number from 1 to 65535"
    return _nats_query_problem(rest.partition("?")[2])


# The NATS driver's URL options and the values each takes (engine/drivers/nats/connection.py
# reads them; nats-py takes none from the URL, so another one would be dropped unread).
NATS_OPTIONS = {"replicas": ("1", "2", "3", "4", "5"), "storage": ("file", "memory")}


def _nats_query_problem(query: str) -> str | None:
    for key, value in parse_qsl(query, keep_blank_values=True):
        if key not in NATS_OPTIONS:
            return (
                f"the nats driver takes no option {json.dumps(key[:40])} in the URL (it takes "
                f"{' and '.join(f'{o}=' for o in NATS_OPTIONS)})"
            )
        if value not in NATS_OPTIONS[key]:
            return f"{key}= is one of {', '.join(NATS_OPTIONS[key])}"
    return None


def nats_kept(url: str) -> str:
    """`url` without each query option `_nats_query_problem` refuses (its default taken)."""
    head, _, query = url.partition("?")
    pairs = [_near_key(p, tuple(NATS_OPTIONS)) for p in query.split("&") if p]
    named = [unquote_plus(p.partition("=")[2]) for p in pairs if p.partition("=")[0] == "bucket"]
    if named and named[0]:
        # `?bucket=NAME` names the bucket the path holds: the path it plainly stands for.
        scheme, _, rest = head.partition("://")
        head = f"{scheme}://{rest.partition('/')[0]}/{named[0]}"
    kept = [p for p in pairs if _nats_query_problem(p) is None]
    return f"{head}?{'&'.join(kept)}" if kept else head


def driver_url_problem(url: str) -> str | None:
    """Why the Redis or NATS driver cannot use `url`, found before it is handed over (see
    `redis_url_problem`, `nats_url_problem`), or None."""
    return redis_url_problem(url) or nats_url_problem(url)


def redis_kept(url: str) -> str | None:
    """`url` without each query option `redis_url_problem` refuses: the URL it plainly stands
    for (the option dropped, its default taken); None for text that is no URL."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    pairs = [_near_key(pair, (REDIS_PREFIX_PARAM,)) for pair in parts.query.split("&") if pair]
    kept = [p for p in pairs if redis_url_problem(urlunsplit(parts._replace(query=p))) is None]
    return urlunsplit(parts._replace(query="&".join(kept)))


def _near_key(pair: str, keys: Collection[str]) -> str:
    """`pair` (key=value) with its key written as the one of `keys` it plainly misspells."""
    key, sep, value = pair.partition("=")
    return f"{_meant_option(key, keys) or key}{sep}{value}"


def split_param(url: str, param: str) -> tuple[str, str | None]:
    """`url` without this package's own option `param` (a database library would refuse it, or
    send it to the server), and the option's value, if given. The rest is left as written."""
    parts = urlsplit(url)
    pairs = [pair for pair in parts.query.split("&") if pair]
    named = [unquote_plus(p.partition("=")[2]) for p in pairs if _key(p) == param]
    if not named:
        return url, None
    kept = [p for p in pairs if _key(p) != param]
    return urlunsplit(parts._replace(query="&".join(kept))), named[0]


def split_schema(url: str) -> tuple[str, str | None]:
    """The URL asyncpg reads, and the schema its `?schema=` names, if any."""
    return split_param(url, SCHEMA_PARAM)


def naming(url: str, param: str, value: str) -> str:
    """`url` with its `param` option set to `value`: the URL of an install that an option of
    `connect()` chose, as the CLI and a fix line must name it."""
    parts = urlsplit(url)
    kept = [p for p in parts.query.split("&") if p and _key(p) != param]
    query = "&".join([*kept, f"{quote_plus(param)}={quote_plus(value, safe=':')}"])
    return urlunsplit(parts._replace(query=query))


def _key(pair: str) -> str:
    return unquote_plus(pair.partition("=")[0])


def _is_port(text: str) -> bool:
    return text.isascii() and text.isdigit() and 1 <= int(text) <= 65_535


def without_password(url: str) -> str:
    """A PostgreSQL `url` without its password (in the user part or a `password=` parameter):
    what a fix line may print. The client takes the password from PGPASSWORD or ~/.pgpass."""
    parts = urlsplit(url)
    userinfo, at, host = parts.netloc.rpartition("@")
    netloc = f"{userinfo.partition(':')[0]}@{host}" if at and ":" in userinfo else parts.netloc
    pairs = [pair for pair in parts.query.split("&") if pair]
    kept = [p for p in pairs if p.partition("=")[0].lower() != "password"]
    if netloc == parts.netloc and len(kept) == len(pairs):
        return url
    return urlunsplit(parts._replace(netloc=netloc, query="&".join(kept)))


DATABASE_URL_ENV = "MCP_JOBS_DATABASE_URL"
# How a fix line names a database whose URL carries a secret it must not print.
URL_FROM_ENV = f'"${DATABASE_URL_ENV}"'
_SECRET_PARAMS = frozenset({"password", "token", "user", "username", "pass"})


def printable_url(url: str) -> str | None:
    """The database URL as a fix line may print it: a PostgreSQL one without its password;
    any other as it is when it carries no credentials, else None (a Redis password, a NATS user
    or token: such a driver's client reads them from nowhere else). None too for the URL
    MCP_JOBS_DATABASE_URL holds with a password: the line names the variable, which holds it
    where the line runs, where the URL without it would fail unless PGPASSWORD has it."""
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    try:
        if scheme in ("postgres", "postgresql"):
            bare = without_password(url)
            return None if bare != url and os.environ.get(DATABASE_URL_ENV) == url else bare
        parts = urlsplit(url)
    except ValueError:
        return None
    secret = any(k.lower() in _SECRET_PARAMS for k, _ in parse_qsl(parts.query))
    return None if "@" in parts.netloc or secret else url


# Query options whose value is a secret, masked in a printed URL.
MASKED_PARAMS = frozenset({"password", "pass", "token"})
# Schemes whose URL may carry a bare token as its user part (`nats://TOKEN@host`), one per host.
_TOKEN_SCHEMES = frozenset({"nats", "tls"})


def redact(url: str) -> str:
    """The URL with its secrets masked (a password in the user part, a NATS token there, a
    `password=` / `token=` option), for output and logs. Works on the raw text, so a
    percent-encoded password is masked too."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    hosts = parts.netloc.split(",") if scheme in _TOKEN_SCHEMES else [parts.netloc]
    netloc = ",".join(_masked_host(host, token=scheme in _TOKEN_SCHEMES) for host in hosts)
    query = "&".join(
        f"{key}=***" if key.lower() in MASKED_PARAMS else f"{key}{eq}{value}"
        for key, eq, value in (pair.partition("=") for pair in parts.query.split("&"))
    )
    if (netloc, query) == (parts.netloc, parts.query):
        return url  # nothing to hide (and urlunsplit would rewrite `sqlite:///…`)
    return urlunsplit(parts._replace(netloc=netloc, query=query))


def _masked_host(netloc: str, *, token: bool) -> str:
    userinfo, at, host = netloc.rpartition("@")
    if at and ":" in userinfo:
        return f"{userinfo.partition(':')[0]}:***@{host}"
    return f"***@{host}" if at and token else netloc


def url_word(url: str) -> str:
    """`url` as one shell word of a fix line: `printable_url` quoted, else the environment
    variable that names the database."""
    printable = printable_url(url)
    return URL_FROM_ENV if printable is None else shell_word(printable)


# An empty URL is most often "$VAR" with VAR unset: read as none, every command would quietly
# open (and create) the default SQLite file instead of the database meant.
_EMPTY_REASON = "it is empty ({}), and read as none it would open the default SQLite file instead"


def given_url(url: object, variable: str | None) -> str | None:
    """`connect(url)`'s URL before anything opens: a str or None (INVALID_ARGUMENT), not ""
    (DATABASE_URL_INVALID), and with `url` None, `variable` (MCP_JOBS_DATABASE_URL's value)
    set but empty is refused for the same reason."""
    if url is not None and not isinstance(url, str):
        expected = f"a database URL (str), or None for ${DATABASE_URL_ENV}"
        raise InvalidArgumentError("url", url, expected)
    if url == "":
        reason = _EMPTY_REASON.format("url=''")
        fix = f"leave url out: connect() then opens ${DATABASE_URL_ENV}, else .mcp-jobs/jobs.db"
        raise DatabaseUrlInvalidError("", reason=reason, fix=fix)
    if url is None and variable == "":
        reason = _EMPTY_REASON.format(f"{DATABASE_URL_ENV} is set to ''")
        raise DatabaseUrlInvalidError("", reason=reason, fix=f"unset {DATABASE_URL_ENV}")
    return url


def fixed_on_argument(
    exc: DatabaseUrlInvalidError, meant: str | None, default: str
) -> DatabaseUrlInvalidError:
    """`exc` refusing the URL `connect()` was given as its argument: that outranks the variable,
    so a fix exporting MCP_JOBS_DATABASE_URL changed nothing. Its fix passes instead the URL
    meant (`meant_url`, as a fix may print it), else `default`."""
    if exc.answered or not exc.fix.startswith(f"export {DATABASE_URL_ENV}="):
        return exc
    printable = None if meant is None else printable_url(meant)
    exc.fix = f"jobs = await connect({printable or default!r})"
    return exc


def migrate_fix(url: str) -> str:
    """`mcp-jobs db migrate` on the database `url` names: the bare command, run where
    MCP_JOBS_DATABASE_URL is not set, would migrate the default SQLite file instead."""
    return f"mcp-jobs db migrate --database-url {url_word(url)}"


def report_fix(url: str) -> str:
    """`mcp-jobs db report` on the database `url` names: the fix of a server that does not
    answer, is full or refuses, runnable wherever this package is (no psql or redis-cli)."""
    return f"mcp-jobs db report --database-url {url_word(url)}"


__all__ = [
    "DATABASE_URL_ENV",
    "MASKED_PARAMS",
    "SCHEMA_NAME",
    "SCHEMA_NAME_RULE",
    "SCHEMA_PARAM",
    "URL_FROM_ENV",
    "check_postgres_url",
    "driver_url_problem",
    "fixed_on_argument",
    "given_url",
    "meant_url",
    "migrate_fix",
    "naming",
    "nats_url_problem",
    "postgres_url_correction",
    "postgres_url_problem",
    "printable_url",
    "redact",
    "redis_kept",
    "redis_url_problem",
    "report_fix",
    "slashes_missing",
    "slashes_reason",
    "split_param",
    "split_schema",
    "sqlite_path",
    "url_word",
    "without_password",
]
