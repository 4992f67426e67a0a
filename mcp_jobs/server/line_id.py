"""The id of a JSON-RPC line that could not be parsed, read from its text: a client waits on that
id, so a refusal that carries it releases the client, and one with id null leaves it hanging.

Only the top-level object's "id" key counts (one inside params is some other thing's id), so the
text is walked token by token outside strings, tracking depth, not searched. The text may stop
anywhere (the part of an over-size line that was read): what was read before that still counts.
"""

from __future__ import annotations

import json
import re

from mcp_jobs.server.request_ids import echoed_id

# The end of an over-size message kept while the rest is dropped: where an id written last is.
TAIL_BYTES = 4096

# A string (to its closing quote, or to where the text stops), a run of openers, a run of
# closers, or a run of anything else (commas, colons, numbers, words): runs keep a deep payload
# from costing a Python step a byte.
_TOKEN = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"?|[\[{]+|[\]}]+|[^"{}\[\]]+', re.DOTALL)
_SPACE = re.compile(rb"[ \t\r\n]*")
# An integer id, not followed by what would make it a float (those are never echoed).
_INTEGER = re.compile(rb"-?(?:0|[1-9][0-9]*)(?![0-9.eE])")


def top_level_id(line: bytes) -> str | int | None:
    """The first "id" of the top-level object on `line`, when it is an integer or a short string
    (as a parsed message's would be echoed); else None."""
    start = _SPACE.match(line)
    if start is None or not line.startswith(b"{", start.end()):
        return None
    depth, key_next = 0, False
    for token in _TOKEN.finditer(line, start.end()):
        text = token.group()
        if text[0] in b"[{":
            key_next = depth == 0 and text == b"{"
            depth += len(text)
        elif text[0] in b"]}":
            depth -= len(text)
            if depth <= 0:
                return None  # the top-level object ended without an id
            key_next = False
        elif text[0] != ord('"'):
            if depth == 1 and text.strip(b" \t\r\n"):
                key_next = text.rstrip(b" \t\r\n").endswith(b",")
        elif key_next and depth == 1:  # a key of the top-level object
            key_next = False
            if _key(text) == "id":
                return _value(line, token.end())
        else:
            key_next = False
    return None


# A line's end that is its top-level object's last member, "id", with an integer or string value:
# the `"` of the key follows a `,` or `{` unescaped, which inside a string it cannot; the value is
# followed by one `}`, the last of the line, which closes the top-level object.
_TRAILING_ID = re.compile(
    rb'[,{][ \t\r\n]*"id"[ \t\r\n]*:[ \t\r\n]*'
    rb'(-?(?:0|[1-9][0-9]*)|"(?:[^"\\]|\\.)*")[ \t\r\n]*\}[ \t\r\n]*\Z',
    re.DOTALL,
)


def trailing_id(tail: bytes) -> str | int | None:
    """The id of a line written with "id" as its top-level object's last member (the
    TypeScript SDK writes it so), read from the line's last bytes `tail`: what an over-size
    line's first bytes do not hold. None when its end is anything else."""
    found = _TRAILING_ID.search(tail)
    if found is None:
        return None
    return _value(b":" + found.group(1) + b"}", 0)


def over_size_id(head: bytes, tail: bytes | None) -> str | int | None:
    """The id of a message refused for its size, from its first bytes `head` (`top_level_id`),
    else from its last bytes `tail` (`trailing_id`) when its end was read."""
    ident = top_level_id(head)
    return trailing_id(tail) if ident is None and tail is not None else ident


def kept_tail(tail: bytes, more: bytes) -> bytes:
    """The last `TAIL_BYTES` of `tail` followed by `more`, copying no more of `more` than that."""
    return (tail + more[-TAIL_BYTES:])[-TAIL_BYTES:]


def _key(text: bytes) -> str | None:
    try:
        key = json.loads(text)
    except ValueError:  # cut short, or a broken escape: no key we can name
        return None
    return key if isinstance(key, str) else None


def _value(line: bytes, after_key: int) -> str | int | None:
    at = _SPACE.match(line, after_key)
    if at is None or not line.startswith(b":", at.end()):
        return None
    at = _SPACE.match(line, at.end() + 1)
    if at is None:
        return None
    number = _INTEGER.match(line, at.end())
    if number is not None and number.end() < len(line):  # a number cut short is no id
        return echoed_id({"id": int(number.group())})
    token = _TOKEN.match(line, at.end())
    if token is None or not token.group().startswith(b'"'):
        return None
    ident = _key(token.group())
    if ident is None or (not ident.isascii() and not _encodes(ident)):
        return None  # a lone surrogate: an id no reply could be written with
    return echoed_id({"id": ident})


def _encodes(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True
