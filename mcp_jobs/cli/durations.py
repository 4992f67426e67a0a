"""A duration a person writes in words ("7 days", "7days", "30 min"), as the text a duration
flag reads ("7d"): a refusal's fix is then the line with it, not the command's --help. Only a
number and one unit word; anything else stands for no duration here."""

from __future__ import annotations

import re
from collections.abc import Sequence

# Unit words and their usual short forms, by the unit letter a duration's text takes.
_UNITS = {
    "ms": ("millisecond", "milli", "msec"),
    "s": ("second", "sec"),
    "m": ("minute", "min"),
    "h": ("hour", "hr"),
    "d": ("day",),
    "w": ("week", "wk"),
}
_WORD = {word + plural: unit for unit, words in _UNITS.items() for word in words for plural in "s"}
_WORD |= {word: unit for unit, words in _UNITS.items() for word in words}
_SPELT = re.compile(r"(\d+(?:\.\d+)?)\s*([a-z]+)")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def unit_of(word: str) -> str | None:
    """The unit letter a unit word stands for ("days": "d"), else None."""
    return _WORD.get(word.strip().lower())


def spelt(text: str) -> str | None:
    """`text` as a duration's text when it is a number and a unit word ("7 days": "7d"), else
    None (a duration's text already, or no duration)."""
    match = _SPELT.fullmatch(text.strip().lower())
    unit = None if match is None else unit_of(match[2])
    return None if match is None or unit is None else match[1] + unit


def joined(argv: Sequence[str], flags: Sequence[str]) -> list[str] | None:
    """`argv` with a duration flag's number and the unit word typed after it as one value
    (`--since 7 days`: `--since-seconds 7d`; a prefix the parser took is written whole), or
    None when no duration flag is followed so."""
    words = list(argv)
    for n, word in enumerate(words[:-1]):
        flag, equals, given = word.partition("=")
        # A prefix the parser took for its flag (`--since`), never a bare `--`.
        named = [f for f in flags if f.startswith(flag)] if len(flag) > 3 else []
        if len(named) != 1:
            continue
        value, unit_at = (given, n + 1) if equals else (words[n + 1], n + 2)
        unit = unit_of(words[unit_at]) if unit_at < len(words) else None
        if unit is None or _NUMBER.fullmatch(value) is None:
            continue
        return [*words[:n], named[0], value + unit, *words[unit_at + 1 :]]
    return None
