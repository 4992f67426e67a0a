"""A refused call's next_call checked for what the strict model cannot see: a cursor that does
not go with the call (another list's, or no cursor at all). Mended only for its page size, such
a call would be refused next for the cursor; it is refused for both at once instead
(CURSOR_INVALID, whose next_call is the first page of the mended call)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from engine.errors import CursorInvalidError, JobsError
from mcp_jobs import operations
from mcp_jobs.server.calls import ToolContext, scope_for
from mcp_jobs.server.oauth_grants import authorize

# Each paged read tool's operation and the arguments of its call that carry a cursor.
_PAGED: dict[str, tuple[Callable[..., Awaitable[Any]], tuple[str, ...]]] = {
    "describe_jobs": (operations.describe_jobs, ("cursor",)),
    "list_jobs": (operations.list_jobs, ("cursor",)),
    "inspect_job": (operations.inspect_job, ("steps_cursor", "events_cursor")),
    "list_backfills": (operations.list_backfills, ("runs_cursor",)),
}


async def cursor_first(refused: JobsError, ctx: ToolContext | None) -> JobsError:
    """`refused`, or, when its next_call carries a cursor that call's own check refuses, that
    CURSOR_INVALID saying what `refused` said too. The check is the operation itself, run on
    the next_call (a read, at most one page): the cursor's rule keeps its one home."""
    call = refused.next_call
    if ctx is None or call is None or call.tool not in _PAGED:
        return refused
    operation, cursors = _PAGED[call.tool]
    if all(call.arguments.get(name) is None for name in cursors):
        return refused
    try:
        scope = scope_for(ctx, call.tool)
        authorize(scope.settings, call.tool, mutating=False)
        await operation(scope, **call.arguments)
    except CursorInvalidError as exc:
        exc.cause = f"{exc.cause}; and {refused.cause}"
        return exc
    except Exception:  # anything else is the next call's own answer to give
        return refused
    return refused
