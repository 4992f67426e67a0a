"""A cursor sent to a tool that did not hand it out: CURSOR_WRONG_TOOL naming the tool it came
from, instead of a generic CURSOR_INVALID or a page read from the wrong place."""

from __future__ import annotations

from engine.paging import CURSOR_OWNERS, MAX_ANY_CURSOR_BYTES, cursor_kind
from mcp_jobs.errors import CursorWrongToolError
from schemas.errors import NextCall

__all__ = ["MAX_ANY_CURSOR_BYTES", "refuse_foreign"]


def refuse_foreign(tool: str, argument: str, value: object, call: NextCall) -> None:
    """Raise CURSOR_WRONG_TOOL when `value`, given as `tool`'s `argument`, is a cursor another
    tool or argument handed out (one of the engine's kinds, describe_jobs' included). `call`:
    `tool`'s first page, the fix."""
    kind = cursor_kind(value)
    owner = CURSOR_OWNERS[kind] if kind is not None else None
    if owner is not None and owner != (tool, argument) and isinstance(value, str):
        raise CursorWrongToolError(argument, value, owner, tool, call)
