"""What the worker's log says of a task that does not fire: its traceback once, when the failure
starts or changes, and a fix that acts on the worker's own database or none at all."""

from __future__ import annotations

import logging
import os
import shlex
import sys
from pathlib import Path

import anyio
import pytest

from engine import JobRegistry, Jobs, ManualClock
from engine.fix_lines import as_raised
from engine.tasks import Scheduler, task

MINUTE = 60_000


def failure_lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [
        r for r in caplog.records if r.name == "mcp_jobs.scheduler" and r.levelno >= logging.ERROR
    ]


async def test_a_failing_enqueue_logs_its_traceback_when_it_starts_or_changes_only(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    raised: list[type[Exception]] = [RuntimeError]

    def broken(at: int) -> list[tuple[str, dict[str, int]]]:
        raise raised[0]("the app's database is down")

    task(name="broken", cron="* * * * *", tz="UTC", enqueue=broken, registry=registry)
    scheduler = Scheduler(jobs, holder="only")
    await scheduler.round()
    clock.advance(MINUTE - 10_000)
    with caplog.at_level(logging.DEBUG, "mcp_jobs.scheduler"):
        for _ in range(5):  # every round fails; its traceback is logged at the first
            clock.advance(10_000)
            assert "broken" in (await scheduler.round()).failed
        raised[0] = ValueError  # the failure changes: its new traceback is worth a line
        for _ in range(3):
            clock.advance(10_000)
            await scheduler.round()
    tracebacks = [
        logging.Formatter().formatException(r.exc_info) for r in caplog.records if r.exc_info
    ]
    assert len(tracebacks) == 2, tracebacks
    assert "RuntimeError: the app's database is down" in tracebacks[0]
    assert "ValueError: the app's database is down" in tracebacks[1]
    assert len(failure_lines(caplog)) == 2


def declare_orphan(registry: JobRegistry) -> None:
    task(
        name="orphan",
        cron="* * * * *",
        tz="UTC",
        enqueue=lambda at: [("gone_job", {"at": at})],
        registry=registry,
    )


async def failing_line(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> tuple[str, str]:
    """The logged line of the orphan task's failure, and the error's own fix."""
    declare_orphan(registry)
    scheduler = Scheduler(jobs, holder="only")
    await scheduler.round()
    clock.advance(MINUTE)
    with caplog.at_level(logging.ERROR, "mcp_jobs.scheduler"):
        error = (await scheduler.round()).failed["orphan"]
    (line,) = failure_lines(caplog)
    return line.getMessage(), error.fix


@pytest.mark.drivers("sqlite", reason="the logged fix is run against the worker's file")
async def test_the_logged_fix_of_a_failing_task_runs_against_the_workers_database(
    jobs: Jobs,
    registry: JobRegistry,
    clock: ManualClock,
    caplog: pytest.LogCaptureFixture,
    tmp_path: Path,
) -> None:
    message, raw_fix = await failing_line(jobs, registry, clock, caplog)
    fix = as_raised(jobs.fix_context, raw_fix)
    assert fix != raw_fix and "--database-url" in fix
    assert f"(fix: {fix})" in message
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    program = Path(sys.executable).parent / "mcp-jobs"
    words = shlex.split(fix)
    assert words[0] == "mcp-jobs"
    with anyio.fail_after(60):
        ran = await anyio.run_process(
            [str(program), *words[1:]],
            cwd=elsewhere,
            check=False,
            env={k: v for k, v in os.environ.items() if k != "MCP_JOBS_DATABASE_URL"},
        )
    assert ran.returncode == 0, ran.stderr.decode()
    assert not (elsewhere / ".mcp-jobs").exists()  # it opened the worker's database, no other


async def test_a_worker_whose_fix_context_is_unknown_logs_no_command_line(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    jobs.fix_context = None  # a face's worker: the engine cannot name its whole context
    message, raw_fix = await failing_line(jobs, registry, clock, caplog)
    assert raw_fix.startswith("mcp-jobs ")
    assert "mcp-jobs" not in message
    assert "JOB_UNKNOWN" in message
