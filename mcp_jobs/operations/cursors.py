"""A cursor sent to a tool that did not hand it out: CURSOR_WRONG_TOOL naming the tool it came
from, instead of a generic CURSOR_INVALID or, where a cursor is a name (describe_jobs), a page
read from the wrong place."""

from __future__ import annotations

from collections.abc import Collection

from engine.backfill.ledger import MAX_RUNS_CURSOR_BYTES
from engine.bounds import MAX_NAME_BYTES
from engine.client import Jobs
from engine.paging import CURSOR_OWNERS, MAX_CURSOR_BYTES, MAX_LIST_CURSOR_BYTES, cursor_kind
from engine.tasks import task_roster
from mcp_jobs.errors import CursorWrongToolError
from schemas.errors import NextCall

# describe_jobs pages by name: its cursor is the last job or task name of the page before.
NAMES_CURSOR = ("describe_jobs", "cursor")
# The longest cursor any tool hands out (a describe_jobs cursor is a name): every cursor
# argument takes up to this, so another tool's cursor reaches the owner check below rather than
# a length refusal that cannot say whose it is. Past it, no tool handed it out.
MAX_ANY_CURSOR_BYTES = max(
    MAX_NAME_BYTES, MAX_CURSOR_BYTES, MAX_LIST_CURSOR_BYTES, MAX_RUNS_CURSOR_BYTES
)


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


async def names_cursors(jobs: Jobs) -> set[str]:
    """What a describe_jobs cursor can be: a job's or a cron task's name. Read only on the path
    of a cursor already refused, to name its owner."""
    names = {d.name for d in await jobs.describe()}
    return names | {t.name for t in await task_roster(jobs)}
