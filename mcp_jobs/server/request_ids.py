"""The JSON-RPC message rule both transports answer by. A parsed message that is not JSON-RPC
2.0 (a batch array, null, a number, `"jsonrpc": "1.0"`, a method that is no string, params that
are no object) is -32600 "not a JSON-RPC 2.0 message", with no validator's dump. MCP's requests
carry an id that is a string or an integer, never null: a message naming a method with any other
id was read by the SDK as a notification, so its sender got no answer and waited; both
transports answer it -32600 instead (id null: none can be echoed)."""

from __future__ import annotations

from typing import Any

from mcp.types import JSONRPCMessage, jsonrpc_message_adapter
from pydantic import ValidationError

INVALID_ID = "Invalid request: an id is a string or an integer"
NOT_JSON_RPC = "Invalid request: not a JSON-RPC 2.0 message"
# An id longer than this is not echoed (a correlation id is short; a long one is an attack).
ECHOED_ID_CHARS = 200


def has_invalid_id(raw: Any) -> bool:
    """Whether `raw` (a parsed JSON message) is a request whose id is neither a string nor an
    integer (a float with no fraction is one, as JSON counts numbers)."""
    if not isinstance(raw, dict) or "method" not in raw or "id" not in raw:
        return False
    ident = raw["id"]
    if isinstance(ident, bool):
        return True
    if isinstance(ident, float):
        return not ident.is_integer()
    return not isinstance(ident, str | int)


def read_message(raw: Any) -> JSONRPCMessage | tuple[str | int | None, str]:
    """The message `raw` (parsed JSON) is, or the -32600 refusal answering it: (the id to echo,
    the message)."""
    try:
        message = jsonrpc_message_adapter.validate_python(raw, by_name=False)
    except ValidationError:
        return echoed_id(raw), NOT_JSON_RPC
    if has_invalid_id(raw):
        return None, INVALID_ID
    return message


def echoed_id(raw: Any) -> str | int | None:
    """The id an error answering `raw` carries: its own when it is a string (not too long) or an
    integer, else null."""
    ident = raw.get("id") if isinstance(raw, dict) else None
    if isinstance(ident, int) and not isinstance(ident, bool):
        return ident
    if isinstance(ident, str) and len(ident) <= ECHOED_ID_CHARS:
        return ident
    return None
