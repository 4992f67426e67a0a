"""A duration a person writes in words ("7 days", "7days", "30 min"), as the text a duration
reads ("7d"): a refusal's fix, on the CLI, over MCP or for a retention variable
(`engine.retention`), is then the value with it, not a slot, a default or the command's --help.
Only a number and one unit word (years too: a year is 365 days, as no duration's text takes
years); anything else stands for no duration."""

from __future__ import annotations

import re

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
# Years, which no duration's text takes: read as whole days (or hours), 365 to a year.
_YEAR_WORDS = frozenset({"y", "yr", "yrs", "year", "years"})


def unit_of(word: str) -> str | None:
    """The unit letter a unit word stands for ("days": "d"), else None."""
    return _WORD.get(word.strip().lower())


def spelt(text: str) -> str | None:
    """`text` as a duration's text when it is a number and a unit word ("7 days": "7d"), else
    None (a duration's text already, or no duration)."""
    match = _SPELT.fullmatch(text.strip().lower())
    if match is not None and match[2] in _YEAR_WORDS:
        return _years(float(match[1]))
    unit = None if match is None else unit_of(match[2])
    return None if match is None or unit is None else match[1] + unit


def _years(years: float) -> str | None:
    """`years` as whole days ("365d"), else whole hours; None for a part of an hour."""
    for unit, per_year in (("d", 365), ("h", 365 * 24)):
        count = years * per_year
        if count.is_integer():
            return f"{int(count)}{unit}"
    return None


__all__ = ["spelt", "unit_of"]
