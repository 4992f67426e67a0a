"""Dead letters grouped by their stored error code, for the dashboard.

The total per queue is the stats' full dead count (kept by the drivers as jobs come and go); the
grouping reads only the newest `sample` dead jobs, one `list` page (LIMIT, newest first on the
settled-state index), so the page costs the same with a million settled jobs in history as with
ten. When more dead jobs exist than were read, `complete` is false and the page says so.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from engine.bounds import MAX_PAGE
from mcp_jobs.operations.known import unknown_filter
from mcp_jobs.operations.models import Envelope
from mcp_jobs.operations.scope import Scope
from schemas.errors import ErrorPayload

DEFAULT_SAMPLE = 500
# A dead job stored without a structured error (written before errors were structured).
NO_ERROR_CODE = "NO_ERROR"


class DeadLetterGroup(BaseModel):
    code: str
    count: int = Field(description="dead jobs among those read that carry this code")
    queues: list[str]
    newest_job_id: str
    newest_at: int = Field(description="when the newest of them settled (epoch ms)")
    example: ErrorPayload | None = Field(default=None, description="the newest one's error")


class DeadLettersResult(Envelope):
    groups: list[DeadLetterGroup] | None = None
    total: int | None = Field(default=None, description="every dead job stored (the stats' count)")
    read: int | None = Field(default=None, description="how many of them were grouped")
    complete: bool | None = Field(default=None, description="true when every dead job was read")


async def dead_letters(
    scope: Scope, queue: str | None = None, sample: int = DEFAULT_SAMPLE
) -> DeadLettersResult:
    """The newest `sample` dead jobs (of one queue when given), grouped by `last_error.code`,
    biggest group first."""
    tenant = scope.tenant(None)
    counted = await scope.jobs.stats([queue] if queue else None, tenant_id=tenant)
    if queue is not None and not counted:
        # A queue nothing knows is most often a typo: QUEUE_UNKNOWN, as `list_jobs` answers.
        unknown = await unknown_filter(scope, None, queue, tenant)
        if unknown is not None:
            raise unknown
    total = sum(q.dead for q in counted)
    page = await scope.jobs.list(
        state="dead", queue=queue, tenant_id=tenant, limit=max(1, min(sample, MAX_PAGE))
    )
    groups: dict[str, DeadLetterGroup] = {}
    for job in page.jobs:  # newest first: the first of each code is its newest
        code = job.last_error.code if job.last_error is not None else NO_ERROR_CODE
        group = groups.get(code)
        if group is None:
            groups[code] = DeadLetterGroup(
                code=code,
                count=1,
                queues=[job.queue],
                newest_job_id=job.id,
                newest_at=job.finished_at or job.updated_at,
                example=job.last_error,
            )
            continue
        group.count += 1
        if job.queue not in group.queues:
            group.queues.append(job.queue)
    ordered = sorted(groups.values(), key=lambda g: (-g.count, g.code))
    return DeadLettersResult(
        ok=True,
        groups=ordered,
        total=total,
        read=len(page.jobs),
        complete=page.next_cursor is None,
    )
