"""Whether a declared cron task will fire at all, where operators look: a task no live worker
declares (none published it within the live window) is TASK_NOT_SCHEDULED, one whose last fired
occurrence lies periods behind its schedule is TASK_OVERDUE, and `describe_jobs` marks a task no
live worker schedules instead of promising its next occurrence. A server started without the
app's code sees the tasks the workers published with their job descriptors, their stored
failures included."""

from __future__ import annotations

from pydantic import BaseModel

from engine import JobContext, JobDefinition, JobRegistry, Jobs, ManualClock, Worker, job
from engine.tasks import task
from engine.tasks.describe import MISSED_COUNTED
from mcp_jobs.cli.render import WITH_FIXES
from mcp_jobs.config import Settings
from mcp_jobs.fix_context import FixContext
from mcp_jobs.operations.diagnose import diagnose_queue
from mcp_jobs.operations.jobs import describe_jobs
from mcp_jobs.operations.models import DiagnoseQueueResult, Finding
from mcp_jobs.operations.scope import Scope
from schemas.errors import ErrorPayload
from schemas.scheduler import TaskFailure
from tests.support.fix_lines import command_words

HOUR = 3_600_000
APP = "shop.reports"


class At(BaseModel):
    at: int


def declare(registry: JobRegistry) -> JobDefinition[At]:
    """The job `report` and the hourly task `hourly-report` that enqueues it."""

    @job(idempotency_key=lambda i: str(i.at), queue="reports", registry=registry)
    async def report(input: At, ctx: JobContext) -> None:
        pass

    task(
        name="hourly-report",
        cron="0 * * * *",
        tz="UTC",
        enqueue=lambda at: [(report, {"at": at})],
        description="the hourly sales report",
        registry=registry,
    )
    return report


def scope_of(jobs: Jobs, face: str = "mcp") -> Scope:
    return Scope(jobs, Settings(), "diagnose_queue", "test", face=face)  # type: ignore[arg-type]


def app_less(jobs: Jobs) -> Jobs:
    """A client on the same database that has imported none of the app (no --app)."""
    return Jobs(jobs.driver, registry=JobRegistry(), clock=jobs.clock)


def coded(result: DiagnoseQueueResult, code: str) -> list[Finding]:
    return [f for f in result.findings or [] if f.code == code]


async def test_a_task_no_live_worker_declares_is_a_finding_and_described_not_scheduled(
    jobs: Jobs, registry: JobRegistry
) -> None:
    declare(registry)
    diagnosis = await diagnose_queue(scope_of(jobs, "cli"))
    (finding,) = coded(diagnosis, "TASK_NOT_SCHEDULED")
    assert diagnosis.healthy is False and finding.severity == "warning"
    assert '"hourly-report"' in finding.cause
    assert command_words(finding.fix)[:2] == ["mcp-jobs", "worker"]

    described = await describe_jobs(scope_of(jobs))
    (view,) = described.tasks or []
    assert view.scheduled is False and view.source == "registry"
    text = WITH_FIXES["describe_jobs"](described.model_dump(mode="json"), FixContext())
    assert "not scheduled: no live worker" in text


async def test_a_task_a_live_worker_publishes_is_scheduled(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    declare(registry)
    await Worker(jobs, apps=[APP]).publish_descriptors()
    diagnosis = await diagnose_queue(scope_of(jobs))
    assert coded(diagnosis, "TASK_NOT_SCHEDULED") == []
    (view,) = (await describe_jobs(scope_of(jobs))).tasks or []
    assert view.scheduled is True

    clock.advance(31_000)  # its worker has not published since: gone
    (finding,) = coded(await diagnose_queue(scope_of(jobs)), "TASK_NOT_SCHEDULED")
    assert finding.severity == "warning"


async def test_a_server_without_the_app_sees_the_published_tasks_and_their_failures(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    declare(registry)
    await Worker(jobs, apps=[APP]).publish_descriptors()
    server = app_less(jobs)

    described = await describe_jobs(scope_of(server))
    (view,) = described.tasks or []
    assert (view.name, view.source, view.scheduled) == ("hourly-report", "published", True)
    assert (view.cron, view.timezone, view.catch_up) == ("0 * * * *", "UTC", "skip")
    assert view.description == "the hourly sales report"
    assert view.next_occurrences and view.next_occurrences[0].at % HOUR == 0
    named = await describe_jobs(scope_of(server), "hourly-report")
    assert [t.name for t in named.tasks or []] == ["hourly-report"]
    # The published row carries the tasks, but a job's descriptor does not show them.
    assert all("tasks" not in d.model_dump() or d.tasks is None for d in described.jobs or [])

    error = ErrorPayload(
        code="TASK_ENQUEUE_FAILED",
        title="a task's enqueue function raised",
        cause="it raised",
        fix='python -c "import shop"',
        retryable=True,
    )
    now = clock.now_ms()
    failure = TaskFailure(error=error, since=now, last_failed_at=now, rounds=3)
    await jobs.driver.task_failure("hourly-report", failure)
    (failing,) = coded(await diagnose_queue(scope_of(server)), "TASK_FAILING")
    assert '"hourly-report"' in failing.cause and __name__ in failing.cause

    clock.advance(31_000)  # the worker is gone: nothing schedules the task now
    await jobs.driver.task_claim("hourly-report", None, clock.now_ms() - HOUR)  # fired again
    (finding,) = coded(await diagnose_queue(scope_of(server, "cli")), "TASK_NOT_SCHEDULED")
    words = command_words(finding.fix)
    assert words[:2] == ["mcp-jobs", "worker"] and words[words.index("--app") + 1] == APP


async def test_a_task_periods_behind_its_schedule_is_overdue(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    declare(registry)
    clock.advance(10 * 60_000)
    await Worker(jobs, apps=[APP]).publish_descriptors()
    behind = (clock.now_ms() // HOUR - 72) * HOUR  # last fired three days ago
    assert await jobs.driver.task_claim("hourly-report", None, behind)

    diagnosis = await diagnose_queue(scope_of(jobs))
    (finding,) = coded(diagnosis, "TASK_OVERDUE")
    assert diagnosis.healthy is False and '"hourly-report"' in finding.cause
    # How many occurrences have not fired: counted up to a bound.
    assert f"at least {MISSED_COUNTED} occurrence(s)" in finding.cause
    (view,) = (await describe_jobs(scope_of(jobs))).tasks or []
    assert view.missed == MISSED_COUNTED

    clock.advance(31_000)  # and now no live worker declares it either: one finding, critical
    diagnosis = await diagnose_queue(scope_of(jobs))
    assert coded(diagnosis, "TASK_OVERDUE") == []
    (finding,) = coded(diagnosis, "TASK_NOT_SCHEDULED")
    assert finding.severity == "critical" and f"at least {MISSED_COUNTED}" in finding.cause


async def test_a_task_fired_on_time_is_not_overdue(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    declare(registry)
    clock.advance(10 * 60_000)
    await Worker(jobs, apps=[APP]).publish_descriptors()
    latest = clock.now_ms() // HOUR * HOUR
    assert await jobs.driver.task_claim("hourly-report", None, latest - HOUR)  # one missed
    diagnosis = await diagnose_queue(scope_of(jobs))
    assert coded(diagnosis, "TASK_OVERDUE") == [] and coded(diagnosis, "TASK_NOT_SCHEDULED") == []


async def test_a_task_taken_out_of_its_app_is_not_reported_unscheduled(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    report = declare(registry)
    task(name="weekly-digest", cron="0 9 * * 1", tz="UTC",
         enqueue=lambda at: [(report, {"at": at})], registry=registry)  # fmt: skip
    await Worker(jobs, apps=[APP]).publish_descriptors()
    clock.advance(31_000)
    # The next version of the app renames the job and drops the weekly digest; its worker runs.
    newer = JobRegistry()

    @job(idempotency_key=lambda i: str(i.at), queue="reports", registry=newer)
    async def sales_report(input: At, ctx: JobContext) -> None:
        pass

    task(name="hourly-report", cron="0 * * * *", tz="UTC",
         enqueue=lambda at: [(sales_report, {"at": at})], registry=newer)  # fmt: skip
    await Worker(Jobs(jobs.driver, registry=newer, clock=clock), apps=[APP]).publish_descriptors()

    server = app_less(jobs)
    diagnosis = await diagnose_queue(scope_of(server))
    assert coded(diagnosis, "TASK_NOT_SCHEDULED") == []
    views = {t.name: t for t in (await describe_jobs(scope_of(server))).tasks or []}
    assert views["hourly-report"].scheduled is True
    assert views["weekly-digest"].scheduled is False  # shown as what it is, not reported
