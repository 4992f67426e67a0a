"""What the engine will store as JSON: one rule for every driver.

Strict JSON only: no NaN or Infinity, no string holding a NUL character or a lone surrogate,
string keys, and at most `MAX_DEPTH` levels of nesting. PostgreSQL's jsonb refuses each of these
while SQLite would store them, so the rule is checked in the engine, before any driver (and any
batch shared with other jobs) sees the value.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

# Deeper values are refused: no job output needs more, and a recursive walk must stay bounded.
MAX_DEPTH = 64


class Unstorable(NamedTuple):
    """Where a value breaks the rule (a JSON path such as `$.rows[3].name`) and how."""

    path: str
    reason: str


def find_unstorable(value: Any) -> Unstorable | None:
    """The first place `value` breaks the rule, or None when it may be stored as it is.

    Accepts what `json.dumps` would write without `default=`: dict (str keys), list, tuple,
    str, int, float, bool and None."""
    return _walk(value, "$", 0)


def _walk(value: Any, path: str, depth: int) -> Unstorable | None:
    if value is None or value is True or value is False:
        return None
    kind = type(value)
    if kind is str or isinstance(value, str):
        return _check_text(value, path)
    if kind is int or isinstance(value, int):
        return None
    if kind is float or isinstance(value, float):
        if math.isfinite(value):
            return None
        return Unstorable(path, f"{value!r} is not a JSON number")
    if depth >= MAX_DEPTH:
        return Unstorable(path, f"nested deeper than {MAX_DEPTH} levels")
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                return Unstorable(path, f"a key of type {type(key).__name__} (keys must be str)")
            where = f"{path}.{key[:40]}"
            bad = _check_text(key, where) or _walk(item, where, depth + 1)
            if bad is not None:
                return bad
        return None
    if isinstance(value, list | tuple):
        for index, item in enumerate(value):
            bad = _walk(item, f"{path}[{index}]", depth + 1)
            if bad is not None:
                return bad
        return None
    return Unstorable(path, f"a {kind.__name__}, which is not a JSON value")


def _check_text(text: str, path: str) -> Unstorable | None:
    if "\x00" in text:
        return Unstorable(path, "a string holding a NUL character (\\u0000)")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return Unstorable(path, "a string holding a lone surrogate (not valid Unicode)")
    return None


__all__ = ["MAX_DEPTH", "Unstorable", "find_unstorable"]
