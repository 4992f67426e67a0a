"""A cursor sent to a tool that did not hand it out: CURSOR_WRONG_TOOL naming the tool it came
from, instead of a generic CURSOR_INVALID or, where a cursor is a name (describe_jobs), a page
read from the wrong place."""

from __future__ import annotations

from collections.abc import Collection

from engine.paging import CURSOR_OWNERS, cursor_kind
from mcp_jobs.errors import CursorWrongToolError
from schemas.errors import NextCall

# describe_jobs pages by name: its cursor is the last job or task name of the page before.
NAMES_CURSOR = ("describe_jobs", "cursor")


def refuse_foreign(
    tool: str, argument: str, value: object, call: NextCall, names: Collection[str] = ()
) -> None:
    """Raise CURSOR_WRONG_TOOL when `value`, given as `tool`'s `argument`, is a cursor another
    tool or argument handed out: one of the engine's kinds, or one of `names` (describe_jobs'
    cursors, when the caller can tell). `call`: `tool`'s first page, the fix."""
    kind = cursor_kind(value)
    owner = CURSOR_OWNERS[kind] if kind is not None else None
    if owner is None and isinstance(value, str) and value in names:
        owner = NAMES_CURSOR
    if owner is not None and owner != (tool, argument) and isinstance(value, str):
        raise CursorWrongToolError(argument, value, owner, tool, call)
