"""What the engine will store as JSON: one rule for every driver.

Strict JSON only: no NaN or Infinity, no string holding a NUL character or a lone surrogate,
string keys, and at most `MAX_DEPTH` levels of nesting. PostgreSQL's jsonb refuses each of these
while SQLite would store them, so the rule is checked in the engine, before any driver (and any
batch shared with other jobs) sees the value.
"""

from __future__ import annotations

import math
import re
from typing import Any, NamedTuple

# Deeper values are refused: no job output needs more, and a recursive walk must stay bounded.
MAX_DEPTH = 64
# The rule in words, for a refusal read by someone who cannot open this file.
RULE = (
    "JSON with no NaN or Infinity, no text holding a NUL character or a lone surrogate, string "
    f"keys, and at most {MAX_DEPTH} levels of nesting"
)
# What text may not hold: NUL, and any surrogate code point (in a Python str one is always lone:
# UTF-8 cannot encode it).
_UNSTORABLE_CHARS = re.compile(r"[\x00\ud800-\udfff]")


class Unstorable(NamedTuple):
    """Where a value breaks the rule (a JSON path such as `$.rows[3].name`; `loc`, the keys and
    indexes that lead there) and how; `not_finite`: the breach is a NaN or infinity, which a
    job's input refuses as its own fault (engine.enqueue_items.input_size)."""

    path: str
    reason: str
    loc: tuple[str | int, ...] = ()
    not_finite: bool = False


def find_unstorable(value: Any) -> Unstorable | None:
    """The first place `value` breaks the rule, or None when it may be stored as it is.

    Accepts what `json.dumps` would write without `default=`: dict (str keys), list, tuple,
    str, int, float, bool and None."""
    if type(value) is dict:
        # One level of ASCII keys to ints, finite floats, bools, None and ASCII text without
        # NUL is storable as is: decided in this loop (most job inputs, and every enqueue
        # checks its input) instead of a call per key and per value. Anything else: the walk.
        for key, item in value.items():
            if type(key) is not str or not key.isascii() or "\x00" in key:
                break
            kind = type(item)
            if kind is str:
                if not item.isascii() or "\x00" in item:
                    break
            elif kind is float:
                if not math.isfinite(item):
                    break
            elif not (kind is int or kind is bool or item is None):
                break
        else:
            return None
    fault = _walk(value, 0)
    if fault is None:
        return None
    steps, reason, not_finite = fault
    loc = tuple(reversed(steps))
    path = "".join(f"[{s}]" if type(s) is int else f".{str(s)[:40]}" for s in loc)
    return Unstorable("$" + path, reason, loc, not_finite)


def storable_text(text: str) -> str:
    """`text` with every character the rule refuses replaced by U+FFFD: for messages the engine
    stores on a job's behalf (an exception's text), which must not be refused in its place."""
    if text.isascii() and "\x00" not in text:
        return text
    return _UNSTORABLE_CHARS.sub("\ufffd", text)


# A breach found by the walk: the path's steps (keys and indexes), innermost first (the path is
# only spelled out once something is found: every job output is walked), what is wrong there,
# and whether that is a NaN or infinity.
_Fault = tuple[list[str | int], str, bool]


def _walk(value: Any, depth: int) -> _Fault | None:
    kind = type(value)
    if kind is str:
        return _text_fault(value)
    if value is None or value is True or value is False or kind is int:
        return None
    if isinstance(value, str):
        return _text_fault(value)
    if isinstance(value, int):
        return None
    if kind is float or isinstance(value, float):
        if math.isfinite(value):
            return None
        return [], f"{value!r} is not a JSON number", True
    if depth >= MAX_DEPTH:
        return [], f"nested deeper than {MAX_DEPTH} levels", False
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                return [], f"a key of type {type(key).__name__} (keys must be str)", False
            fault = _text_fault(key) or _walk(item, depth + 1)
            if fault is not None:
                fault[0].append(key)
                return fault
        return None
    if isinstance(value, list | tuple):
        for index, item in enumerate(value):
            fault = _walk(item, depth + 1)
            if fault is not None:
                fault[0].append(index)
                return fault
        return None
    return [], f"a {kind.__name__}, which is not a JSON value", False


def _text_fault(text: str) -> _Fault | None:
    if text.isascii() and "\x00" not in text:  # an O(1) flag, then one scan: most text is ASCII
        return None
    if "\x00" in text:
        return [], "a string holding a NUL character (\\u0000)", False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return [], "a string holding a lone surrogate (not valid Unicode)", False
    return None


__all__ = ["MAX_DEPTH", "Unstorable", "find_unstorable", "storable_text"]
