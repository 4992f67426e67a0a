"""A refused enqueue_job call checked for what the strict model cannot see: a `name` no job has.
Mended only for its other arguments (a slot for a missing input), such a call keeps the name and
is refused next for it; it is refused for the name first instead (JOB_UNKNOWN, saying what else
was wrong), its fix the call with the name meant, or the jobs listed."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcp.server.mcpserver.tools.base import Tool

from engine.errors import JobsError, JobUnknownError
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
    name = arguments.get("name")
    if ctx is None or tool.name not in _NAMES_A_JOB or not isinstance(name, str):
        return refused
    try:
        scope = scope_for(ctx, tool.name)
        authorize(scope.settings, "describe_jobs", mutating=False)  # it lists the jobs
        await scope.jobs.describe(name)
    except JobUnknownError as exc:
        exc.cause = f"{exc.cause}; and {refused.cause}"
        with calling(tool, arguments):
            unknown = mended(exc)
        return unknown if isinstance(unknown, JobsError) else exc
    except Exception:  # anything else (a name past its bounds, a token's scope) is not this
        return refused
    return refused
