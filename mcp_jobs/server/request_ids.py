"""The JSON-RPC request id rule both transports answer by: MCP's requests carry an id that is a
string or an integer, never null. A message naming a method with any other id was read by the
SDK as a notification, so its sender got no answer and waited; both transports answer it
-32600 instead (id null: none can be echoed)."""

from __future__ import annotations

from typing import Any

INVALID_ID = "Invalid request: an id is a string or an integer"


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
