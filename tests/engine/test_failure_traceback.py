"""A job body's exception keeps its traceback: bounded to its innermost frames in the stored
failure (`last_error.details.traceback`, on every driver), and on the worker's log line (a dead
or failed job's always, a retried one's at DEBUG)."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest

from engine import JobContext, JobRegistry, Jobs, ManualClock, Permanent, Retry, Worker, job
from engine.drivers.memory import MemoryDriver
from engine.errors import JobTimeoutError
from engine.logs import configure_logging
from engine.retry import retry_schedule
from engine.run_job import describe_error
from schemas.errors import ErrorPayload
from tests.support.worker_jobs import Item


def lookup(table: dict[str, int], key: str) -> int:
    return table[key]  # the line an operator needs to see


def dive(depth: int, message: str) -> None:
    if depth == 0:
        raise ValueError(message)
    dive_again(depth - 1, message)


def dive_again(depth: int, message: str) -> None:
    # Two functions in turn: Python folds a run of one repeated frame into a line.
    dive(depth, message)


# Where `lookup` raises, as a traceback names it.
RAISED_AT = f'File "{__file__}", line {lookup.__code__.co_firstlineno + 1}, in lookup'


async def run_dead(jobs: Jobs, registry: JobRegistry, body: Any) -> ErrorPayload:
    """Run `body` once as a job that is not retried; the error it left."""

    @job(idempotency_key=lambda i: str(i.n), retry=Retry(attempts=1), registry=registry)
    async def doomed(input: Item, ctx: JobContext) -> None:
        body()

    queued = await jobs.enqueue(doomed, {"n": 1})
    await Worker(jobs, prune=False).run_until_idle()
    record = await jobs.get(queued.id)
    assert record.state == "dead" and record.last_error is not None
    return record.last_error


def traceback_of(error: ErrorPayload) -> str:
    assert error.details is not None and "traceback" in error.details, error
    trace = error.details["traceback"]
    assert isinstance(trace, str)
    return trace


async def test_a_dead_job_keeps_its_body_s_traceback_on_every_driver(
    jobs: Jobs, registry: JobRegistry
) -> None:
    error = await run_dead(jobs, registry, lambda: lookup({}, "x"))
    assert (error.code, error.cause) == ("JOB_FAILED", "KeyError: 'x'")
    assert error.details is not None and error.details["exception"] == "KeyError"
    trace = traceback_of(error)
    assert trace.startswith("Traceback (most recent call last):\n")
    # The file, line and function of the raise: what `KeyError: 'x'` alone never says.
    assert RAISED_AT in trace
    assert "return table[key]" in trace
    assert trace.rstrip("\n").endswith("KeyError: 'x'")


async def test_text_the_database_refuses_is_replaced_not_dropped(
    jobs: Jobs, registry: JobRegistry
) -> None:
    # NUL and a lone surrogate: PostgreSQL's jsonb refuses both; the traceback must still land.
    error = await run_dead(jobs, registry, lambda: dive(0, "bad\x00byte \ud800"))
    trace = traceback_of(error)
    assert trace.rstrip("\n").endswith("ValueError: bad\ufffdbyte \ufffd")


@pytest.mark.drivers("memory", reason="the bound is the engine's, before any driver")
async def test_a_deep_traceback_keeps_its_innermost_frames_within_the_bound(
    jobs: Jobs, registry: JobRegistry
) -> None:
    from engine.run_job import TRACEBACK_CHARS

    error = await run_dead(jobs, registry, lambda: dive(400, "deep down"))
    trace = traceback_of(error)
    assert len(trace) <= TRACEBACK_CHARS
    lines = trace.splitlines()
    # Said to be cut, at the top; the raise and the exception line kept, at the bottom.
    assert "left off" in lines[0]
    assert lines[-1] == "ValueError: deep down"
    assert "raise ValueError(message)" in trace and "in dive" in trace


@pytest.mark.drivers("memory", reason="the bound is the engine's, before any driver")
async def test_a_huge_exception_message_is_cut_to_the_bound(
    jobs: Jobs, registry: JobRegistry
) -> None:
    from engine.run_job import TRACEBACK_CHARS

    error = await run_dead(jobs, registry, lambda: dive(0, "x" * 100_000))
    trace = traceback_of(error)
    assert len(trace) <= TRACEBACK_CHARS and trace.lstrip().startswith(("[", "ValueError: xxx"))


@pytest.mark.drivers("memory", reason="what the engine makes of a failure, before any driver")
async def test_a_retried_and_a_permanent_failure_keep_it_too(
    clock: ManualClock, registry: JobRegistry
) -> None:
    jobs = Jobs(MemoryDriver(clock), registry=registry, clock=clock)

    @job(idempotency_key=lambda i: str(i.n), retry=Retry(attempts=3), registry=registry)
    async def flaky(input: Item, ctx: JobContext) -> None:
        if input.n == 1:
            lookup({}, "x")
        raise Permanent("no such customer")

    retried = await jobs.enqueue(flaky, {"n": 1})
    permanent = await jobs.enqueue(flaky, {"n": 2})
    await Worker(jobs, prune=False).run_until_idle()
    waiting = await jobs.get(retried.id)
    assert waiting.state == "delayed" and waiting.last_error is not None
    assert "in lookup" in traceback_of(waiting.last_error)
    failed = await jobs.get(permanent.id)
    assert failed.state == "failed" and failed.last_error is not None
    assert "Permanent: no such customer" in traceback_of(failed.last_error)


def test_an_error_the_engine_makes_has_no_traceback_to_keep() -> None:
    # A timeout or an unknown name is the engine's verdict: no frame of the body to show.
    timed_out = describe_error(JobTimeoutError("work", 1_000), "j1")
    assert "traceback" not in (timed_out.details or {})


@pytest.fixture
def log_at() -> Iterator[Any]:
    """Send the `mcp_jobs` loggers to a buffer as JSON or text at a level; restored after."""
    target = logging.getLogger("mcp_jobs")
    level = target.level
    handlers: list[logging.Handler] = []

    def start(level_name: str, as_json: bool = True) -> io.StringIO:
        stream = io.StringIO()
        handlers.append(
            configure_logging(json=as_json, level=level_name, stream=stream, logger="mcp_jobs")
        )
        return stream

    yield start
    for handler in handlers:
        target.removeHandler(handler)
    target.setLevel(level)


def worker_records(stream: io.StringIO) -> dict[str, dict[str, Any]]:
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    return {r["job"]["kind"]: r for r in lines if r["logger"] == "mcp_jobs.worker"}


async def _retried_then_dead(clock: ManualClock, registry: JobRegistry) -> None:
    jobs = Jobs(MemoryDriver(clock), registry=registry, clock=clock)
    policy = Retry(attempts=2)

    @job(idempotency_key=lambda i: str(i.n), retry=policy, registry=registry)
    async def doomed(input: Item, ctx: JobContext) -> None:
        lookup({}, "x")

    await jobs.enqueue(doomed, {"n": 1})
    worker = Worker(jobs, prune=False)
    await worker.run_until_idle()
    clock.advance(sum(retry_schedule(policy)) + 1)
    await worker.run_until_idle()


@pytest.mark.drivers("memory", reason="logging does not involve the database")
async def test_the_dead_line_carries_the_traceback_and_a_retried_one_only_at_debug(
    clock: ManualClock, registry: JobRegistry, log_at: Any
) -> None:
    stream = log_at("INFO")
    await _retried_then_dead(clock, registry)
    by_kind = worker_records(stream)
    dead, retried = by_kind["dead"], by_kind["retried"]
    assert dead["level"] == "ERROR" and dead["job"]["error"] == "KeyError: 'x'"
    assert dead["exc"].startswith("Traceback (most recent call last):")
    assert RAISED_AT in dead["exc"]
    assert dead["exc"].endswith("KeyError: 'x'")
    # A retry to come says its error in one line; its traceback is in last_error, and here
    # at DEBUG.
    assert retried["level"] == "WARNING" and "exc" not in retried


@pytest.mark.drivers("memory", reason="logging does not involve the database")
async def test_at_debug_a_retried_line_carries_it_too(
    clock: ManualClock, registry: JobRegistry, log_at: Any
) -> None:
    stream = log_at("DEBUG")
    await _retried_then_dead(clock, registry)
    by_kind = worker_records(stream)
    assert "in lookup" in by_kind["retried"]["exc"] and "in lookup" in by_kind["dead"]["exc"]
    assert "exc" not in by_kind["claimed"]


@pytest.mark.drivers("memory", reason="logging does not involve the database")
async def test_the_text_log_puts_the_traceback_below_the_dead_line(
    clock: ManualClock, registry: JobRegistry, log_at: Any
) -> None:
    stream = log_at("INFO", as_json=False)
    await _retried_then_dead(clock, registry)
    lines = stream.getvalue().splitlines()
    (at,) = [i for i, line in enumerate(lines) if " job.dead " in line]
    assert lines[at + 1] == "    Traceback (most recent call last):"
    below = lines[at + 1 :]
    assert any(line.strip() == RAISED_AT for line in below)
    assert "    KeyError: 'x'" in below
