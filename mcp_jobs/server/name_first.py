"""A refused enqueue_job call checked for what the strict model cannot see: a `name` no job has,
and an input its job's model refuses. Mended only for its other arguments (a slot for a missing
input, an unknown argument left out), such a call keeps the name or the input and is refused next
for it; it is refused for the name first instead (JOB_UNKNOWN, saying what else was wrong), its
fix the call with the name meant, or the jobs listed; and for the input (JOB_INPUT_INVALID, the
same), its fix the mended call with the input's fields renamed, where that mend is plain."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcp.server.mcpserver.tools.base import Tool

from engine.client import Jobs
from engine.enqueue_items import Enqueue
from engine.errors import JobInputInvalidError, JobsError, JobUnknownError
from mcp_jobs.errors import ToolArgumentsInvalidError
from mcp_jobs.operations.job_input import refuse_coerced
from mcp_jobs.server.calls import ToolContext, scope_for
from mcp_jobs.server.engine_refusal import calling, mended
from mcp_jobs.server.oauth_grants import authorize

# The tools whose `name` must be a job this server can enqueue.
_NAMES_A_JOB = frozenset({"enqueue_job"})
# The ids of a request built only to check its input.
_NO_ID = "0" * 32


async def name_first(
    refused: JobsError, tool: Tool, arguments: Mapping[str, Any], ctx: ToolContext | None
) -> JobsError:
    """`refused`, or JOB_UNKNOWN (mended as the engine's own) when the call names no job. The
    check is the engine's (`Jobs.describe`): registered here or published by a worker."""
    name = arguments.get("name")
    if ctx is None or tool.name not in _NAMES_A_JOB or not isinstance(name, str):
        return refused
    try:
        scope = scope_for(ctx, tool.name)
        authorize(scope.settings, "describe_jobs", mutating=False)  # it lists the jobs
        await scope.jobs.describe(name)
    except JobUnknownError as exc:
        exc.cause = f"{exc.cause}; and {refused.cause}"
        # Mended from the call the refusal's next_call runs, where it has one: its own mend
        # (a number at its range's end) kept, not the value refused again next.
        call = refused.next_call
        with calling(tool, call.arguments if call and call.tool == tool.name else arguments):
            unknown = mended(exc)
        return unknown if isinstance(unknown, JobsError) else exc
    except Exception:  # anything else (a name past its bounds, a token's scope) is not this
        return refused
    return await _input_too(refused, tool, scope.jobs, name)


async def _input_too(refused: JobsError, tool: Tool, jobs: Jobs, name: str) -> JobsError:
    """`refused`, or JOB_INPUT_INVALID over the call its fix shows when the job's model (or
    its published schema) refuses that call's input: the engine's own check, nothing stored.
    Where no rename mends the input, `refused` says so too, and its mended call, which would be
    refused next for the input, is no longer offered as `next_call`."""
    offered = refused.next_call
    if isinstance(refused, ToolArgumentsInvalidError):
        call = refused.mended
    elif offered is not None and offered.tool == tool.name:
        call = dict(offered.arguments)  # a value out of range, mended to its end
    else:
        call = None
    if call is None or not isinstance(call.get("input"), dict):
        return refused
    try:
        await jobs.items.one(
            Enqueue(name, call["input"]), None, jobs.clock.now_ms(), None, _NO_ID, _NO_ID
        )
        # What the model takes only by coercion (`"7"` for an integer) the enqueue refuses.
        refuse_coerced(jobs.registry, name, call["input"])
    except JobInputInvalidError as exc:
        alone, unmended = exc.cause, exc.fix
        with calling(tool, call):
            shown = mended(exc)
        if isinstance(shown, JobsError) and shown.fix != unmended:  # both mended in one call
            shown.cause = f"{alone}; and {refused.cause}"
            return shown
        refused.cause = f"{refused.cause}; and {alone}"
        refused.next_call = None
    except Exception:  # a key, a tenant, a bound: the call as mended says those itself
        return refused
    return refused
