"""A JSON-RPC message read from its text (a stdio line, a POSTed HTTP body), or the error that
answers text holding none: a parse error (-32700) or an invalid request (-32600), with the id
the text names where one can be read (`line_id`), else null. Both transports answer by it, so
a client is refused in the same words whichever it speaks."""

from __future__ import annotations

import json
import re
from typing import Any

import pydantic_core
from mcp.shared.message import SessionMessage
from mcp.types import INVALID_REQUEST, PARSE_ERROR, ErrorData, JSONRPCError

from mcp_jobs.server.line_id import top_level_id
from mcp_jobs.server.request_ids import read_message

LONE_SURROGATE = (
    "Parse error: a string holds a lone surrogate escape (\\ud800-\\udfff alone), which is no"
    " Unicode character; send the character itself, or its full surrogate pair"
)
_SURROGATE = re.compile("[\ud800-\udfff]")


def parse_line(line: bytes) -> SessionMessage | JSONRPCError:
    """The message on `line`, or the JSON-RPC error that answers it."""
    try:
        raw = pydantic_core.from_json(line)
    except ValueError as exc:
        reread = _reread(line, f"Parse error: {str(exc)[:200]}")
        if isinstance(reread, JSONRPCError):
            return reread
        raw = reread
    message = read_message(raw)
    if isinstance(message, tuple):
        return rpc_error(*message)
    return SessionMessage(message)


def _reread(line: bytes, refusal: str) -> Any:
    """What `line` holds by Python's reader, when it is JSON deeper than pydantic's reader goes
    (the tool then refuses the value, naming its depth, as for one a little less deep); else the
    parse error answering it, with the id its text gives, so the client waiting on it is freed.
    A lone surrogate escape is refused: no reply could echo it, nor could the engine store it."""
    ident = top_level_id(line)
    try:
        raw = json.loads(line)
    except (ValueError, RecursionError):  # not JSON, or deeper than Python can read either
        return rpc_error(ident, refusal, PARSE_ERROR)
    if has_lone_surrogate(raw):
        return rpc_error(ident, LONE_SURROGATE, PARSE_ERROR)
    return raw


def has_lone_surrogate(value: Any) -> bool:
    """Whether any string in `value` (parsed JSON, of any depth) holds a lone surrogate."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, str) and not item.isascii() and _SURROGATE.search(item):
            return True
    return False


def rpc_error(ident: str | int | None, message: str, code: int = INVALID_REQUEST) -> JSONRPCError:
    """The JSON-RPC error answering the message whose id is `ident`."""
    return JSONRPCError(jsonrpc="2.0", id=ident, error=ErrorData(code=code, message=message))
