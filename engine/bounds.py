"""Bounds on the values a caller hands the engine, checked before any driver sees them.

A value out of bounds is `InvalidArgumentError` (INVALID_ARGUMENT, terminal) naming the argument
and the bound, the same on every driver. Without these checks PostgreSQL refused such values
mid-statement (reported as "database unavailable", retryable), SQLite stored them, and memory
accepted anything. Text must also pass the storable rule (`engine.storable`): no NUL, no lone
surrogate. Lengths are in bytes of UTF-8: a job's name, tenant and key share one btree entry in
PostgreSQL, which holds at most 2704 bytes, and these bounds keep the three well inside it.
"""

from __future__ import annotations

import math
import os
import re
import unicodedata
from collections.abc import Callable, Mapping
from typing import Any

import pydantic_core

from engine.errors import LEFT_OUT, NOTHING_NEAR, InvalidArgumentError
from engine.rules import PRIORITY_MAX, PRIORITY_MIN
from engine.storable import RULE as STORABLE_RULE
from engine.storable import find_unstorable

MAX_NAME_BYTES = 200  # a job or backfill name, and a name filter
MAX_QUEUE_BYTES = 200
MAX_TENANT_BYTES = 200
MAX_KEY_BYTES = 1024  # an idempotency key, as the job's function computes it
MAX_ID_BYTES = 64  # a job id, a run id, a list cursor (an id): ids are 32 hex digits
MAX_ACTOR_BYTES = 200  # enqueued_by / actor, an event's kind, a backfill environment
MAX_PAGE = 1000  # rows per list page
MAX_DESCRIPTION_BYTES = 16 * 1024  # a job's, task's or backfill's, in every descriptor
MAX_QUEUES = 1000  # queue names in one stats call
# 10 years of 365 days: no job waits longer, and now + delay stays far inside int64 ms.
MAX_DELAY_SECONDS = 10 * 365 * 86_400
MAX_DELAY_MS = MAX_DELAY_SECONDS * 1000
# A cap on jobs at once (`@job(concurrency=)`, `Limits`, `Worker(concurrency=)`): PostgreSQL's
# slot function takes caps as int4, and a million jobs at once is past any fleet.
MAX_CAP = 1_000_000

# A TCP port to listen on; 0 asks the system for any free one.
MAX_PORT = 65_535

# Input payloads: compact UTF-8 JSON of the validated input, at most this many bytes.
PAYLOAD_ENV = "MCP_JOBS_MAX_PAYLOAD_BYTES"
DEFAULT_MAX_PAYLOAD_BYTES = 1 << 20
# What the setting itself may be: PostgreSQL's jsonb holds at most 255 MiB.
PAYLOAD_CEILING = 1 << 27

# A str this short (in characters) is within `max_bytes` however it encodes: no encode needed.
_UTF8_MAX = 4


def text(argument: str, value: object, max_bytes: int) -> str:
    """`value` when it is a non-empty str of at most `max_bytes` bytes of UTF-8 that may be
    stored (no NUL, no lone surrogate); else INVALID_ARGUMENT."""
    # Most text is ASCII: a byte a character and no surrogate, so the str's ASCII flag and one
    # scan for NUL decide it (every enqueue checks its key here).
    if (
        type(value) is str
        and value.isascii()
        and 0 < len(value) <= max_bytes
        and "\x00" not in value
    ):
        return value
    if (
        isinstance(value, str)
        and not refused_text(value)
        and (len(value) * _UTF8_MAX <= max_bytes or len(value.encode()) <= max_bytes)
    ):
        return value
    raise InvalidArgumentError(
        argument,
        value,
        f"a non-empty str of at most {max_bytes} bytes (UTF-8), "
        "with no NUL character or lone surrogate",
    )


def refused_text(value: str) -> bool:
    """Whether `text` refuses `value` whatever the bound: empty, or holding a NUL or a lone
    surrogate."""
    return not value or find_unstorable(value) is not None


# A name is shown in logs, tables and terminals, and written into fix lines: no character that
# forges a line or drives a terminal (C0, DEL, C1, line and paragraph separators, bidirectional
# overrides and isolates, which reorder what a reader sees).
NAME_RULE = "with no control character, line or paragraph separator or bidirectional override"
_BIDI = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
_UNSHOWABLE = frozenset({"Cc", "Zl", "Zp"})
# A terminal escape sequence (`\x1b[31m`, and its C1 form): a mended name drops it whole.
_ESCAPE = re.compile(r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]")
# To a worker, `queues="*"` is every queue: no queue can be named so.
EVERY_QUEUE = "*"
# A name declared in code (a job, queue or event name) also holds no invisible format character
# (a zero-width space or joiner, a soft hyphen, a BOM): two such names look alike everywhere
# they are shown. A tenant or key is app data, whose real text may hold them.
CODE_NAME_RULE = "and no invisible format character (zero-width space or joiner, soft hyphen)"


def _showable(char: str) -> bool:
    return char not in _BIDI and unicodedata.category(char) not in _UNSHOWABLE


def _visible(char: str) -> bool:
    return _showable(char) and unicodedata.category(char) != "Cf"


def _dropped(text: str, keep: Callable[[str], bool] = _showable) -> str:
    """`text` without what `NAME_RULE` refuses (a terminal escape sequence whole), or what
    `keep` does not."""
    return "".join(c for c in _ESCAPE.sub("", text) if keep(c))


def name(
    argument: str,
    value: object,
    max_bytes: int,
    *,
    option_safe: bool = False,
    reserved: frozenset[str] = frozenset(),
    mended: str | None = None,
    in_code: bool = False,
) -> str:
    """THE check of a name a caller writes (a job, queue or event name, a tenant, a key): `text`
    that a log, a table and a terminal show as written (`NAME_RULE`); with `option_safe`, not
    starting with '-' (a command line reads it as an option), and none of `reserved`; `in_code`
    (a name declared in code), `CODE_NAME_RULE` too. Refused,
    `nearest` is the name with what is wrong dropped, else `mended` (NOTHING_NEAR when None).
    Only new writes are checked: a name already stored is read, listed and matched as is."""
    checked = text(argument, value, max_bytes)
    # Printable ASCII is most names: one C-level test, no per-character look.
    plain = checked.isascii() and checked.isprintable()
    keep = _visible if in_code else _showable
    if (plain or all(keep(c) for c in checked)) and not (
        (option_safe and checked.startswith("-")) or checked in reserved
    ):
        return checked
    dropped = _dropped(checked, keep)
    dropped = dropped.lstrip("-") if option_safe else dropped
    near = dropped if dropped and dropped not in reserved else mended
    rules = [NAME_RULE + (f" {CODE_NAME_RULE}" if in_code else "")]
    if option_safe:
        rules.append("not starting with '-' (a command line reads it as an option)")
    rules += [f"not {r!r} (a worker reads it as every queue)" for r in sorted(reserved)]
    raise InvalidArgumentError(
        argument,
        value,
        f"a name {', '.join(rules)}",
        # The fix is said; each face writes `nearest` into the call or command it was given.
        nearest=NOTHING_NEAR if near is None else near,
    )


def job_name(argument: str, value: object) -> str:
    """A job name, as a declaration or an enqueue writes it."""
    return name(argument, value, MAX_NAME_BYTES, option_safe=True, in_code=True)


def queue_name(argument: str, value: object, mended: str | None = None) -> str:
    """A queue a job is declared in (or a cap is keyed by); `mended`: its refusal's nearest
    where dropping characters leaves no name."""
    return name(
        argument,
        value,
        MAX_QUEUE_BYTES,
        option_safe=True,
        reserved=frozenset({EVERY_QUEUE}),
        mended=mended,
        in_code=True,
    )


def event_name(argument: str, value: object) -> str:
    """An event's name, as a send or a wait writes it (declared in code, like a job's)."""
    return name(argument, value, MAX_NAME_BYTES, option_safe=True, in_code=True)


def tenant(argument: str, value: object) -> str:
    """A tenant id: app data (a customer id), so a leading '-' is its own (a fix line joins
    it to its flag, `--tenant=-1`)."""
    return name(argument, value, MAX_TENANT_BYTES)


def optional_tenant(argument: str, value: object) -> str | None:
    """`tenant`, or None when `value` is None."""
    return None if value is None else tenant(argument, value)


def key(argument: str, value: object) -> str:
    """An idempotency or event key: app data, like a tenant."""
    return name(argument, value, MAX_KEY_BYTES)


def optional_actor(argument: str, value: object) -> str | None:
    """Who acts, as a caller names them (`enqueued_by`, a cancel's, retry's or pause's actor),
    or None: `name`'s rule, as history and logs show it; no command line takes it as a word,
    so a leading '-' is its own."""
    return None if value is None else name(argument, value, MAX_ACTOR_BYTES)


# Where a line of prose breaks (`str.splitlines`' breaks) and a tab: a mended line has a space
# for each run of them, where dropping them would join the words on either side.
_BREAKS = re.compile(r"[\t\n\x0b\x0c\r\x1c\x1d\x1e\x85\u2028\u2029]+")


def optional_line(argument: str, value: object, max_bytes: int) -> str | None:
    """Prose a caller may write, shown on one line (a pause's reason), or None: `name`'s rule
    (a break would forge a line of a log, a row of a table). Refused, `nearest` has a space
    for each run of breaks, or is LEFT_OUT where nothing else is left."""
    if value is None:
        return None
    checked = text(argument, value, max_bytes)
    try:
        return name(argument, checked, max_bytes)
    except InvalidArgumentError:
        # Said as prose is, not as a name: the reader is told what a reason may hold.
        raise InvalidArgumentError(
            argument,
            checked,
            f"one line of text {NAME_RULE}",
            nearest=_dropped(_BREAKS.sub(" ", checked)).strip() or LEFT_OUT,
        ) from None


def optional_text(argument: str, value: object, max_bytes: int) -> str | None:
    """`text`, or None when `value` is None."""
    return None if value is None else text(argument, value, max_bytes)


def narrowing(argument: str, values: object, left_out: str) -> None:
    """Refuse an empty list where a list narrows what a call selects: read as left out, it
    would select `left_out` (every state, every queue) where the caller chose none."""
    if isinstance(values, list | tuple | set | frozenset) and not values:
        raise InvalidArgumentError(
            argument, [], f"one or more, or left out for {left_out} (an empty list chooses none)"
        )


def number(
    argument: str, value: object, low: float, high: float, *, whole: bool, unit: str = ""
) -> float:
    """`value` when it is a number (a whole one if `whole`) from `low` to `high`; NaN,
    infinities and bool are refused. THE range check: every bound on a number goes here."""
    if (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and (not whole or isinstance(value, int))
        and low <= value <= high
    ):
        return value
    kind = "a whole number" if whole else "a finite number"
    of = f" of {unit}" if unit else ""
    raise InvalidArgumentError(
        argument, value, f"{kind}{of} from {low} to {high}", nearest=_range_end(value, low, high)
    )


def _range_end(value: object, low: float, high: float) -> object:
    """The end of the range a number of the right kind lies beyond; nothing for any other value
    (NaN, a bool, a fraction where a whole number is due: no end is plainly what it meant)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        if value > high:
            return high
        if value < low:
            return low
    return NOTHING_NEAR


def whole(argument: str, value: object, low: int, high: int, unit: str = "") -> int:
    """`number` for whole numbers."""
    return int(number(argument, value, low, high, whole=True, unit=unit))


def seconds(argument: str, value: object, low: float = 0) -> float:
    """A duration in seconds, from `low` to 10 years: THE bound on every duration a caller
    writes (an enqueue's delay, a job's timeout, a retry delay, a step's sleep), so that each,
    in ms and added to now, stays far inside what every driver stores."""
    return number(argument, value, low, MAX_DELAY_SECONDS, whole=False, unit="seconds")


def cap(argument: str, value: object) -> int:
    """A cap on how many jobs run at once: a whole number from 1 to MAX_CAP."""
    return whole(argument, value, 1, MAX_CAP)


def at_least(argument: str, value: object, low: int) -> int:
    """`value` when it is a whole number ≥ `low` (a count with no upper bound of its own)."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= low:
        return value
    raise InvalidArgumentError(
        argument, value, f"a whole number ≥ {low}", nearest=_range_end(value, low, math.inf)
    )


def port(argument: str, value: object) -> int:
    """A TCP port to listen on, 0 to 65535: a socket takes a larger one modulo 65536 and
    refuses a negative one only as it binds."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_PORT:
        return value
    raise InvalidArgumentError(
        argument,
        value,
        f"a TCP port from 0 to {MAX_PORT} (0: any free one)",
        nearest=_range_end(value, 0, MAX_PORT),
    )


def priority(argument: str, value: object) -> int:
    """A job priority: a whole number in engine.rules' range (higher is claimed first)."""
    return whole(argument, value, PRIORITY_MIN, PRIORITY_MAX)


def flag(argument: str, value: object) -> bool:
    """`value` when it is a bool (a 1 or "yes" is a caller's mistake, not a truth value)."""
    if isinstance(value, bool):
        return value
    raise InvalidArgumentError(argument, value, "true or false")


def payload(
    argument: str, value: Any, max_bytes: int, why: str = f"the bound is set by {PAYLOAD_ENV}"
) -> None:
    """Refuse a JSON value that may not be stored, or whose compact UTF-8 JSON is larger than
    `max_bytes` (`why`: what sets that bound). The error echoes where and how large, never the
    value itself."""
    size = payload_size(argument, value)
    if size > max_bytes:
        raise payload_refused(argument, size, max_bytes, why)


def payload_size(argument: str, value: Any) -> int:
    """The bytes of compact UTF-8 JSON of a value that may be stored; refused (INVALID_ARGUMENT)
    when it may not be."""
    bad = find_unstorable(value)
    if bad is not None:
        raise InvalidArgumentError(argument, f"{bad.reason} at {bad.path}", STORABLE_RULE)
    return len(pydantic_core.to_json(value))


def payload_refused(
    argument: str, size: int, max_bytes: int, why: str = f"the bound is set by {PAYLOAD_ENV}"
) -> InvalidArgumentError:
    """`payload`'s refusal of a value of `size` bytes of JSON, past `max_bytes`."""
    return InvalidArgumentError(
        argument, f"{size} bytes of JSON", f"at most {max_bytes} bytes of JSON ({why})"
    )


# A size written with a unit: K, M or G, with or without B or iB, each a power of 1024 (the
# default bound, 1048576, is "1 MiB" as README says it).
_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([kmg])(?:i?b)?", re.IGNORECASE)
_UNIT = {"k": 1024, "m": 1024**2, "g": 1024**3}


def _bytes_in_units(text: str) -> int | None:
    found = _SIZE.fullmatch(text)
    if found is None:
        return None
    return int(float(found.group(1)) * _UNIT[found.group(2).lower()])


def payload_limit(value: int | None, environ: Mapping[str, str] | None = None) -> int:
    """The input-payload bound: `value` if given, else `MCP_JOBS_MAX_PAYLOAD_BYTES`, else 1 MiB."""
    if value is not None:
        return whole("max_payload_bytes", value, 1, PAYLOAD_CEILING, "bytes")
    raw = (os.environ if environ is None else environ).get(PAYLOAD_ENV, "").strip()
    if not raw:
        return DEFAULT_MAX_PAYLOAD_BYTES
    try:
        return whole(PAYLOAD_ENV, int(raw), 1, PAYLOAD_CEILING, "bytes")
    except (ValueError, InvalidArgumentError) as exc:
        # Only the variable gives it: the fix sets the variable, to the ceiling a number is
        # past, else the default (a bound of 1 byte would refuse every payload).
        past = isinstance(exc, InvalidArgumentError) and exc.nearest == PAYLOAD_CEILING
        nearest = PAYLOAD_CEILING if past else DEFAULT_MAX_PAYLOAD_BYTES
        in_units = _bytes_in_units(raw)  # `2MiB`, `1GB`: the bytes it says, within the bound
        if in_units is not None:
            nearest = min(max(in_units, 1), PAYLOAD_CEILING)
        raise InvalidArgumentError(
            PAYLOAD_ENV,
            raw,
            f"a whole number of bytes from 1 to {PAYLOAD_CEILING}",
            fix=f"export {PAYLOAD_ENV}={nearest}",
        ) from exc


__all__ = [
    "DEFAULT_MAX_PAYLOAD_BYTES",
    "EVERY_QUEUE",
    "MAX_ACTOR_BYTES",
    "MAX_CAP",
    "MAX_DELAY_MS",
    "MAX_DELAY_SECONDS",
    "MAX_DESCRIPTION_BYTES",
    "MAX_ID_BYTES",
    "MAX_KEY_BYTES",
    "MAX_NAME_BYTES",
    "MAX_PAGE",
    "MAX_PORT",
    "MAX_QUEUES",
    "MAX_QUEUE_BYTES",
    "MAX_TENANT_BYTES",
    "NAME_RULE",
    "PAYLOAD_CEILING",
    "PAYLOAD_ENV",
    "at_least",
    "cap",
    "event_name",
    "flag",
    "job_name",
    "key",
    "name",
    "narrowing",
    "number",
    "optional_actor",
    "optional_line",
    "optional_tenant",
    "optional_text",
    "payload",
    "payload_limit",
    "payload_refused",
    "payload_size",
    "port",
    "queue_name",
    "seconds",
    "tenant",
    "text",
    "whole",
]
