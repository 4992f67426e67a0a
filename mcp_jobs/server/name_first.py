"""A refused enqueue_job call checked for what the strict model cannot see: a `name` no job has,
and an input its job's model refuses. Mended only for its other arguments (a slot for a missing
input, an unknown argument left out), such a call keeps the name or the input and is refused next
for it; it is refused for the name first instead (JOB_UNKNOWN, saying what else was wrong), its
fix the call with the name meant, as that job takes it (`operations.meant_job`: a key it computes,
an input renamed), or the jobs listed; and for the input (JOB_INPUT_INVALID, the
same), its fix the mended call with the input's fields renamed, where that mend is plain."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcp.server.mcpserver.tools.base import Tool

from engine.client import Jobs
from engine.enqueue_items import Enqueue
from engine.errors import JobInputInvalidError, JobsError, JobUnknownError
from mcp_jobs.errors import ToolArgumentsInvalidError
from mcp_jobs.operations.meant_job import check_enqueue, meant_checked
from mcp_jobs.server.calls import ToolContext, scope_for
from mcp_jobs.server.engine_refusal import calling, mended
from mcp_jobs.server.oauth_grants import authorize

# The tools whose `name` must be a job this server can enqueue.
_NAMES_A_JOB = frozenset({"enqueue_job"})


async def name_first(
    refused: JobsError, tool: Tool, arguments: Mapping[str, Any], ctx: ToolContext | None
) -> JobsError:
    """`refused`, or JOB_UNKNOWN (mended as the engine's own) when the call names no job. The
    check is the engine's (`Jobs.describe`): registered here or published by a worker."""
    # Checked as the call the refusal's fix shows, where the strict model takes it: its own
    # mend (a number at its range's end, `delay` moved to `delay_seconds`, `["greet"]` as its
    # one name) kept, not the value refused again next.
    shown = _shown_call(refused, tool)
    call = shown if shown is not None else dict(arguments)
    name = arguments.get("name")
    if isinstance(name, list) and len(name) == 1 and call.get("name") == name[0]:
        name = name[0]
    if ctx is None or tool.name not in _NAMES_A_JOB or not isinstance(name, str):
        return refused
    try:
        scope = scope_for(ctx, tool.name)
        authorize(scope.settings, "describe_jobs", mutating=False)  # it lists the jobs
        await scope.jobs.describe(name)
    except JobUnknownError as exc:
        exc.cause = f"{exc.cause}; and {refused.cause}"
        # The fix is that call with the name meant, as the job meant takes it.
        checked = await meant_checked(scope, exc, call)
        with calling(tool, call):
            unknown = mended(checked)
        return unknown if isinstance(unknown, JobsError) else exc
    except Exception:  # anything else (a name past its bounds, a token's scope) is not this
        return refused
    return await _input_too(refused, tool, scope.jobs, name)


def _shown_call(refused: JobsError, tool: Tool) -> dict[str, Any] | None:
    """The arguments of the call `refused`'s fix shows, where the strict model takes them, or
    of the call its next_call runs (a value out of range, mended to its end); else None."""
    offered = refused.next_call
    if isinstance(refused, ToolArgumentsInvalidError):
        return None if refused.mended is None else dict(refused.mended)
    if offered is not None and offered.tool == tool.name:
        return dict(offered.arguments)
    return None


async def _input_too(refused: JobsError, tool: Tool, jobs: Jobs, name: str) -> JobsError:
    """`refused`, or JOB_INPUT_INVALID over the call its fix shows when the job's model (or
    its published schema) refuses that call's input: the engine's own check, nothing stored.
    Where no rename mends the input, `refused` says so too, and its fix and next_call are the
    job's description (as JOB_INPUT_INVALID's), not its mended call, refused next for the input."""
    call = _shown_call(refused, tool)
    if call is None or not isinstance(call.get("input"), dict):
        return refused
    try:
        await check_enqueue(jobs, Enqueue(name, call["input"]))
    except JobInputInvalidError as exc:
        alone, unmended = exc.cause, exc.fix
        with calling(tool, call):
            shown = mended(exc)
        if isinstance(shown, JobsError) and shown.fix != unmended:  # both mended in one call
            shown.cause = f"{alone}; and {refused.cause}"
            return shown
        # The mended call would be refused next for the input: the way on is the job's schema.
        refused.cause = f"{refused.cause}; and {alone}"
        refused.fix, refused.next_call = unmended, exc.next_call
    except Exception:  # a key, a tenant, a bound: the call as mended says those itself
        return refused
    return refused
