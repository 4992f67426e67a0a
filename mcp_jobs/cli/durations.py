"""A duration flag followed by its unit as a word of its own (`--since 7 days`), read as the one
value it stands for (`--since-seconds 7d`)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from engine.durations import unit_of

_NUMBER = re.compile(r"\d+(?:\.\d+)?")


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
