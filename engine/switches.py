"""An on/off setting as every variable of this package reads one (MCP_JOBS_PRUNE,
MCP_JOBS_CONFIRM_WRITES): the one rule for its words, and for the word a slip stands for."""

from __future__ import annotations

import difflib

ON = frozenset({"1", "on", "true", "yes"})
OFF = frozenset({"0", "off", "false", "no"})
WORDS = "on or off (also yes/no, true/false, 1/0)"


def switch(raw: str) -> bool | None:
    """`raw` (any case, blanks around it) as on or off; None when it is neither."""
    word = raw.strip().lower()
    return True if word in ON else False if word in OFF else None


def switch_meant(raw: str, default: str = "on") -> str:
    """ "on" or "off", as a refused value's fix sets it: the one a slip of the keys plainly
    names (`of`, `flase`, `onn`), else `default` - never the other way round by a guess."""
    near = difflib.get_close_matches(raw.strip().lower(), sorted(ON | OFF), n=1, cutoff=0.6)
    if not near:
        return default
    return "off" if near[0] in OFF else "on"


__all__ = ["OFF", "ON", "WORDS", "switch", "switch_meant"]
