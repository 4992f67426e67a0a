"""A cron task that cannot fire is visible where operators look: `diagnose_queue` reports
TASK_FAILING (critical) with the stored error and a fix, and `describe_jobs` / `jobs describe`
show the task as failing since its first failed round. Both run in other processes than the
scheduler's, so they read what the scheduler stored."""

from __future__ import annotations

from pydantic import BaseModel

from engine import JobContext, JobDefinition, JobRegistry, Jobs, ManualClock, job
from engine.tasks import Scheduler, task
from mcp_jobs.cli.render import WITH_FIXES
from mcp_jobs.config import Settings
from mcp_jobs.fix_context import FixContext
from mcp_jobs.operations.diagnose import diagnose_queue
from mcp_jobs.operations.jobs import describe_jobs
from mcp_jobs.operations.models import DiagnoseQueueResult, Finding
from mcp_jobs.operations.scope import Scope
from tests.support.fix_lines import command_words

MINUTE = 60_000


class Tick(BaseModel):
    at: int


def declare_tick(registry: JobRegistry) -> JobDefinition[Tick]:
    @job(idempotency_key=lambda i: f"tick:{i.at}", queue="ptime", registry=registry)
    async def tick(input: Tick, ctx: JobContext) -> None:
        pass

    return tick


def _failing(result: DiagnoseQueueResult) -> list[Finding]:
    return [f for f in result.findings or [] if f.code == "TASK_FAILING"]


async def test_a_task_naming_a_gone_job_is_a_critical_finding_and_described_as_failing(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    tick = declare_tick(registry)
    named = {"job": "gone_job"}
    task(
        name="orphan",
        cron="*/5 * * * *",
        tz="UTC",
        enqueue=lambda at: [(named["job"], {"at": at})],
        registry=registry,
    )
    scope = Scope(jobs, Settings(), "diagnose_queue", "test")
    scheduler = Scheduler(jobs, holder="only")
    assert _failing(await diagnose_queue(scope)) == []  # not due yet: not failing
    clock.advance(5 * MINUTE)
    since = clock.now_ms()
    await scheduler.round()
    clock.advance(10_000)
    await scheduler.round()

    diagnosis = await diagnose_queue(scope)
    (finding,) = _failing(diagnosis)
    assert finding.severity == "critical" and diagnosis.healthy is False
    assert finding.queue is None  # the job it names is unknown, so is its queue
    assert '"orphan"' in finding.cause and "JOB_UNKNOWN" in finding.cause
    assert "gone_job" in finding.cause and "2 round(s)" in finding.cause
    assert finding.last_error is not None and finding.last_error.code == "JOB_UNKNOWN"
    # The stored error's own fix is a command, so it is the finding's (with this context, whose
    # assignments, such as an app imported earlier in the suite declares, stand in front).
    assert command_words(finding.fix)[:4] == ["mcp-jobs", "jobs", "describe", "--json"]
    assert finding.next_call is not None and finding.next_call.tool == "describe_jobs"
    # A queue's diagnosis leaves out a task whose target queue is unknown.
    assert _failing(await diagnose_queue(scope, tick.queue)) == []

    described = await describe_jobs(scope)
    (view,) = described.tasks or []
    assert view.failing is not None and view.failing.error.code == "JOB_UNKNOWN"
    assert view.failing.since == since and view.failing.rounds == 2
    text = WITH_FIXES["describe_jobs"](described.model_dump(mode="json"), FixContext())
    assert "JOB_UNKNOWN" in text and "failing since" in text

    named["job"] = tick.name  # mended and deployed: the next round fires and clears it
    clock.advance(10_000)
    assert (await scheduler.round()).fired
    assert _failing(await diagnose_queue(scope)) == []
    described = await describe_jobs(scope)
    (view,) = described.tasks or []
    assert view.failing is None
    assert "failing" not in WITH_FIXES["describe_jobs"](
        described.model_dump(mode="json"), FixContext()
    )


async def test_a_task_whose_function_returns_none_is_fixed_in_its_declaration(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    declare_tick(registry)
    task(name="nothing", cron="* * * * *", tz="UTC", enqueue=lambda at: None, registry=registry)
    scheduler = Scheduler(jobs, holder="only")
    clock.advance(MINUTE)
    assert "nothing" in (await scheduler.round()).failed
    (finding,) = _failing(await diagnose_queue(Scope(jobs, Settings(), "diagnose_queue", "test")))
    assert finding.last_error is not None and finding.last_error.code == "TASK_ENTRY_INVALID"
    # Its own fix is code, not a line to run: the finding says the declaration must change.
    assert finding.fix.startswith('change task "nothing"') and 'task(name="nothing"' in finding.fix
    assert finding.next_call is None


async def test_a_task_whose_entries_a_job_refuses_is_reported_in_that_jobs_queue(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock
) -> None:
    tick = declare_tick(registry)
    task(
        name="wrong-input",
        cron="* * * * *",
        tz="UTC",
        enqueue=lambda at: [(tick, {"when": at})],
        registry=registry,
    )
    scheduler = Scheduler(jobs, holder="only")
    clock.advance(MINUTE)
    assert "wrong-input" in (await scheduler.round()).failed
    scope = Scope(jobs, Settings(), "diagnose_queue", "test")
    (finding,) = _failing(await diagnose_queue(scope, tick.queue))
    assert finding.queue == tick.queue and finding.last_error is not None
    assert finding.last_error.code == "JOB_INPUT_INVALID"
    (overall,) = _failing(await diagnose_queue(scope))
    assert overall.queue == tick.queue
    assert _failing(await diagnose_queue(scope, "default")) == []
