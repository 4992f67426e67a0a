"""A value as one word of a fix line: THE rule, for the engine and the MCP and CLI faces alike.

A printable value is quoted as `shlex.quote` quotes it. A value holding a character that is not
printable (a newline, a tab, ESC, DEL, a C1 or a format character; bounds admit all of them in a
queue, tenant, name, key, reason) is written in bash's ANSI-C quoting, `$'…'`: in plain quotes
a newline splits the one-line fix, and an ESC recolours the terminal that shows it. Each such
character is the `\\xHH` bytes of its UTF-8, not `\\uHHHH`, which bash leaves as it is under
LC_ALL=C. `$'…'` is bash's (and zsh's, ksh's); dash, a Debian /bin/sh, reads it otherwise.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable

# Named where bash names them; any other unprintable character is `\xHH` bytes.
_NAMED = {"\\": "\\\\", "'": "\\'", "\n": "\\n", "\t": "\\t", "\r": "\\r"}
# What bash reads after a backslash in `$'…'` (octal, `\u` and `\c` are read by `_ansi_c`).
_SIMPLE = {
    "a": "\a",
    "b": "\b",
    "e": "\x1b",
    "E": "\x1b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "\\": "\\",
    "'": "'",
    '"': '"',
    "?": "?",
}
_HEX = frozenset("0123456789abcdefABCDEF")


def shell_word(text: str) -> str:
    """`text` as one printable shell word that bash reads back as exactly `text`."""
    if text.isprintable():
        return shlex.quote(text)
    return "$'" + "".join(_escaped(c) for c in text) + "'"


def shell_join(words: Iterable[str]) -> str:
    """`words` as one command line, each `shell_word`: `shlex.join` for printable words."""
    return " ".join(shell_word(w) for w in words)


def _escaped(char: str) -> str:
    if char in _NAMED:
        return _NAMED[char]
    if char.isprintable():
        return char
    # A path's byte that is not UTF-8 comes as a lone surrogate (surrogateescape): that byte.
    try:
        raw = char.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        raw = char.encode("utf-8", "surrogatepass")
    return "".join(f"\\x{b:02x}" for b in raw)


def for_shlex(line: str) -> str:
    """`line` with each `$'…'` word written as '…' holding the characters it stands for, so that
    `shlex` (which knows no ANSI-C quoting) reads the words bash reads. Other text is kept."""
    if "$'" not in line:
        return line
    out: list[str] = []
    at, end = 0, len(line)
    while at < end:
        char = line[at]
        if char == "\\":
            out.append(line[at : at + 2])
            at += 2
        elif char == "'":
            close = line.find("'", at + 1)
            stop = end if close < 0 else close + 1
            out.append(line[at:stop])
            at = stop
        elif char == '"':
            stop = at + 1
            while stop < end and line[stop] != '"':
                stop += 2 if line[stop] == "\\" else 1
            out.append(line[at : stop + 1])
            at = stop + 1
        elif line.startswith("$'", at):
            value, at = _ansi_c(line, at + 2)
            out.append(shlex.quote(value))
        else:
            out.append(char)
            at += 1
    return "".join(out)


def _ansi_c(line: str, at: int) -> tuple[str, int]:
    """The value of the `$'…'` body starting at `at`, and where reading goes on past its `'`.
    Bytes, as bash builds it: `\\xc2\\x85` is one character."""
    raw = bytearray()
    end = len(line)
    while at < end and line[at] != "'":
        char = line[at]
        if char != "\\" or at + 1 >= end:
            raw += char.encode("utf-8", "surrogateescape")
            at += 1
            continue
        kind = line[at + 1]
        at += 2
        if kind in _SIMPLE:
            raw += _SIMPLE[kind].encode()
        elif kind in "xuU":
            width = {"x": 2, "u": 4, "U": 8}[kind]
            digits = _run(line, at, width, _HEX)
            if not digits:
                raw += b"\\" + kind.encode()
            elif kind == "x":
                raw.append(int(digits, 16))
            else:
                raw += chr(int(digits, 16)).encode("utf-8", "surrogatepass")
            at += len(digits)
        elif kind in "01234567":
            digits = kind + _run(line, at, 2, frozenset("01234567"))
            raw.append(int(digits, 8) & 0xFF)
            at += len(digits) - 1
        else:  # bash keeps an unknown escape as it is
            raw += ("\\" + kind).encode("utf-8", "surrogateescape")
    return raw.decode("utf-8", "surrogateescape"), at + 1


def _run(line: str, at: int, most: int, allowed: frozenset[str]) -> str:
    stop = at
    while stop < len(line) and stop - at < most and line[stop] in allowed:
        stop += 1
    return line[at:stop]


__all__ = ["for_shlex", "shell_join", "shell_word"]
