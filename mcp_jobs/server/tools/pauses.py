"""The pause tools (engine/pauses.py): `pause_queue` and `resume_queue`, mutating and audited.

Registered by `tools.write.register`, so a read-only server has neither. Both are idempotent
(pausing what is paused, or resuming what is not, changes nothing and says so) and not
destructive: no job changes state, claims of the named queue or job just stop or start again.
"""

# No `from __future__ import annotations`: the SDK reads each tool's signature at registration.

from typing import Annotated

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import Field

from engine.bounds import MAX_NAME_BYTES, MAX_QUEUE_BYTES
from engine.pauses import MAX_REASON_BYTES
from mcp_jobs.operations.pauses import (
    PauseQueueResult,
    ResumeQueueResult,
    pause_queue,
    resume_queue,
)
from mcp_jobs.server.calls import ToolContext, run_tool
from mcp_jobs.server.state import AppState

_ANNOTATIONS = ToolAnnotations(
    read_only_hint=False,
    destructive_hint=False,
    idempotent_hint=True,
    open_world_hint=False,
)

Queue = Annotated[
    str | None,
    Field(description="a queue (queue_stats lists them); or give job", max_length=MAX_QUEUE_BYTES),
]
JobName = Annotated[
    str | None,
    Field(description="a job name, in every queue; or give queue", max_length=MAX_NAME_BYTES),
]


def register(server: MCPServer[AppState]) -> None:
    @server.tool(
        name="pause_queue",
        title="Pause a queue or a job",
        annotations=_ANNOTATIONS,
        description=(
            "Stop workers claiming a queue's jobs, or one job name's (exactly one of queue, "
            "job), for every tenant, until resume_queue. Running jobs finish; waiting ones stay "
            "ready and keep counting in queue_stats. Again: already_paused, nothing changes. "
            "Errors: INVALID_ARGUMENT, TENANT_SCOPE_EXCEEDED (a tenant-pinned server)."
        ),
    )
    async def pause_queue_tool(
        ctx: ToolContext,
        queue: Queue = None,
        job: JobName = None,
        reason: Annotated[
            str | None,
            Field(description="why, shown to whoever finds it", max_length=MAX_REASON_BYTES),
        ] = None,
    ) -> Annotated[CallToolResult, PauseQueueResult]:
        return await run_tool(
            ctx,
            "pause_queue",
            lambda s: pause_queue(s, queue, job, reason),
            audit={"queue": queue, "job": job, "reason": reason},
        )

    @server.tool(
        name="resume_queue",
        title="Resume a queue or a job",
        annotations=_ANNOTATIONS,
        description=(
            "Lift pause_queue's pause of a queue or a job name (exactly one): its waiting jobs "
            "are claimed again. Not paused: was_paused false, nothing changes. Errors: "
            "INVALID_ARGUMENT, TENANT_SCOPE_EXCEEDED (a tenant-pinned server)."
        ),
    )
    async def resume_queue_tool(
        ctx: ToolContext, queue: Queue = None, job: JobName = None
    ) -> Annotated[CallToolResult, ResumeQueueResult]:
        return await run_tool(
            ctx,
            "resume_queue",
            lambda s: resume_queue(s, queue, job),
            audit={"queue": queue, "job": job},
        )
