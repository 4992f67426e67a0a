"""A duration flag followed by its unit as a word of its own (`--since 7 days`), read as the one
value it stands for (`--since-seconds 7d`)."""

from __future__ import annotations

from collections.abc import Sequence

from engine.durations import spelt
from engine.retention import meant_duration


def joined(argv: Sequence[str], flags: Sequence[str]) -> list[str] | None:
    """`argv` with a duration flag's number and the unit word typed after it as one value
    (`--since 7 days`: `--since-seconds 7d`; a prefix the parser took is written whole), or
    None when no duration flag is followed so. The two words are read as one by the rule for
    words (engine.durations: `1 year` is 365d), and past ten years, the longest duration any
    flag takes, as that bound: the line given back runs, not refused again for its length."""
    words = list(argv)
    for n, word in enumerate(words[:-1]):
        flag, equals, given = word.partition("=")
        # A prefix the parser took for its flag (`--since`), never a bare `--`.
        named = [f for f in flags if f.startswith(flag)] if len(flag) > 3 else []
        if len(named) != 1:
            continue
        value, unit_at = (given, n + 1) if equals else (words[n + 1], n + 2)
        read = spelt(f"{value} {words[unit_at]}") if unit_at < len(words) else None
        meant = None if read is None else meant_duration(read)
        if meant is None:
            continue
        return [*words[:n], named[0], meant, *words[unit_at + 1 :]]
    return None
