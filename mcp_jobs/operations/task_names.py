"""A cron task's name given where a job's is meant (`queues pause --job nightly`): a pause holds
job names, and a task is none, so the answer says which job the task enqueues — the one whose
pause holds the task's runs.

The job is read from the task's own jobs (`enqueued_by = "task:<name>"`) among the newest
JOB_SCAN: bounded, so a task that has not fired lately, or never, is only named as a task,
with the command that describes it.
"""

from __future__ import annotations

from engine.tasks import task_roster
from engine.tasks.declare import TASK_ACTOR
from mcp_jobs.operations.models import Finding
from mcp_jobs.operations.scope import Scope
from schemas.errors import NextCall

# Jobs read, newest first, to find the one a task enqueues.
JOB_SCAN = 200


async def task_job(scope: Scope, task: str) -> str | None:
    """The job task `task`'s newest run enqueued, among the newest JOB_SCAN jobs."""
    page = await scope.jobs.list(tenant_id=scope.tenant(None), limit=JOB_SCAN)
    actor = f"{TASK_ACTOR}{task}"
    return next((job.name for job in page.jobs if job.enqueued_by == actor), None)


async def paused_task_notice(scope: Scope, name: str, notice: Finding) -> Finding:
    """`notice` (JOB_UNKNOWN for a pause of job name `name`, whose fix resumes it) saying so
    when `name` is a cron task's: the pause of its job holds it, and that is the fix."""
    if name not in {t.name for t in await task_roster(scope.jobs)}:
        return notice
    job = await task_job(scope, name)
    cause = (
        f'"{name}" is a cron task, not a job: a pause holds job names, so this one holds none of '
        f"its runs (it stays in force; to lift it: {notice.fix})"
    )
    if job is None:
        return notice.model_copy(
            update={
                "cause": f"{cause}. Pausing the job the task enqueues holds it; its description "
                "names it once it has fired",
                "fix": scope.fixes.command("jobs", "describe", name, "--json"),
                "next_call": NextCall(tool="describe_jobs", arguments={"name": name}),
            }
        )
    return notice.model_copy(
        update={
            "cause": f'{cause}. It enqueues job "{job}": a pause of that job holds the task\'s '
            f'runs, with every other "{job}" job',
            "fix": scope.fixes.command("queues", "pause", "--job", job),
            "next_call": NextCall(tool="pause_queue", arguments={"job": job}),
        }
    )
