"""One claimed job run to completion, suspension or failure, and settled with the driver.

The single execution path the worker takes. It owns the run's deadline, and a deadline means
CANCEL (rule 8): the body is stopped before the job is handed back, so no second copy of it runs
beside the retry. The heartbeat the worker runs over everything in flight
(engine.worker_leases.LeaseKeeper.beat) delivers the stop of an operator's cancel or a lost lease
at the next beat.
"""

from __future__ import annotations

import asyncio
import logging
import traceback
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Literal

import anyio
from pydantic import ValidationError

from engine.bounds import DEFAULT_MAX_PAYLOAD_BYTES
from engine.clock import Clock
from engine.context import JobContext
from engine.declare import JobDefinition
from engine.drivers.base import EVENTS, Driver, require
from engine.errors import (
    JobFailedError,
    JobInputInvalidError,
    JobOutputTooLargeError,
    JobsError,
    JobSlotLostError,
    JobTimeoutError,
    JobUnknownError,
)
from engine.observe import WorkerEvent, WorkerEventKind
from engine.progress import ProgressReporter
from engine.redaction import scrubbed
from engine.retry import retry_delay_ms
from engine.run_context import RunContext
from engine.settle import Settler, until_written
from engine.steps import EventSuspension, StepSuspension, mend_output, storable_output
from engine.storable import find_unstorable, storable_text
from engine.tracing import run_span
from schemas.errors import ErrorPayload
from schemas.events import EventRecord
from schemas.jobs import ClaimedJob, JobRecord, NackOptions

logger = logging.getLogger("mcp_jobs.worker")

# Jobs a late heartbeat's warning names, at most.
_NAMED_LATE = 5
# The kind of the event a late heartbeat leaves in each running job's history.
HEARTBEAT_LATE = "heartbeat_late"
_BLOCKED = (
    "this worker's event loop was blocked, most often by a job body running blocking code; a "
    "lease that ran out hands its job to another worker, which runs it again. Run blocking code "
    "in a thread: await anyio.to_thread.run_sync(fn), or ctx.step.run(name, fn) with a plain "
    "function"
)

UNKNOWN_NAME_PARK_MS = 30_000

StopReason = Literal["timeout", "cancelled", "lease_lost", "drain"]


class Permanent(Exception):
    """Raise from a job body to fail it now, without the retries its policy would allow."""


class RunHandle:
    """A claimed job in flight: its fencing token and its body's stop switch (first reason wins).

    One cancel scope per job, around the body only: anyio's scopes cost more than the rest of a
    no-op job's Python, and only the body runs code that may shield itself. `tear_down` ends
    the whole task for a worker that has to go: through the scope while the body runs (so a
    shield in it still holds), by cancelling the task anywhere else (the engine's own code)."""

    # One made per job: slots make it and its reads cheaper.
    __slots__ = (
        "claimed",
        "held_ms",
        "in_body",
        "on_body_done",
        "reason",
        "scope",
        "started_ms",
        "task",
        "torn",
    )

    def __init__(
        self, claimed: ClaimedJob, scope_type: type[anyio.CancelScope] = anyio.CancelScope
    ) -> None:
        self.claimed = claimed
        self.scope = scope_type()
        self.reason: StopReason | None = None
        # The task running this job (set when it starts), whether the body is running now,
        # and whether the worker tore the task down (one torn before it started never runs).
        self.task: asyncio.Task[Any] | None = None
        self.in_body = False
        self.torn = False
        # When its body started, and when a claim ahead landed it to wait for a slot (0: it
        # never waited), on the worker's clock.
        self.started_ms = 0
        self.held_ms = 0
        # Called once, when the body is over and only its settle write remains: the worker
        # hands the slot to the next job instead of holding it through a commit.
        self.on_body_done: Callable[[], None] | None = None

    def body_done(self) -> None:
        done, self.on_body_done = self.on_body_done, None
        if done is not None:
            done()

    def stop(self, reason: StopReason) -> None:
        if self.reason is None:
            self.reason = reason
            self.scope.cancel()

    def tear_down(self) -> None:
        """End the job's task without settling it (its lease hands it to another worker)."""
        self.torn = True
        if self.in_body:
            self.scope.cancel()  # execute() sees `torn` once the body is out, and stops there
        elif self.task is not None:
            self.task.cancel()


@dataclass(frozen=True)
class Runtime:
    driver: Driver
    # Settles a finished job and saves its steps, group-committed with other jobs' writes.
    settler: Settler
    clock: Clock
    worker_id: str
    lease_ms: int
    emit: Callable[[WorkerEvent], None]
    # Whether anyone listens for a kind of event: when not, the event is never built.
    wants: Callable[[WorkerEventKind], bool] = lambda kind: True
    # The job names this worker can run, named in the error of a job it cannot.
    known_names: Callable[[], Sequence[str]] = lambda: ()
    # The largest output or step result stored, as an input is bounded (the client's bound).
    max_output_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES


def failure_text(exc: BaseException) -> str:
    """A failure as one storable line, "CODE: cause" or "ExceptionType: text" (engine.storable:
    a NUL in an exception's message cannot make the database refuse the write), credentials
    masked (engine.redaction: a DSN's password in a message is not stored, logged or shown)."""
    if isinstance(exc, JobsError):
        return storable_text(scrubbed(f"{exc.code}: {exc.cause}"))
    said = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return storable_text(scrubbed(said) + _NOTES.get(type(exc), ""))


# What a failure's text adds for an exception that would otherwise say nothing of its cause.
_NOTES: dict[type[BaseException], str] = {
    SystemExit: (
        " (the job body called sys.exit(), as argparse's parser.error does: raise an exception "
        "instead; it failed this job only)"
    ),
    asyncio.CancelledError: (
        " (raised by the job body itself, not by a stop, timeout or cancel: a task it cancelled "
        "and then awaited, most often)"
    ),
}


# What a stored traceback keeps, at most, in characters: its innermost frames when it is longer.
TRACEBACK_CHARS = 4096
# Room for the line saying what was left off.
_MARK_CHARS = 64


def failure_traceback(exc: BaseException) -> str:
    """`exc`'s traceback as Python prints it, made storable, cut to `TRACEBACK_CHARS`: the
    innermost frames and the exception line are kept (where it went wrong), the outer ones said
    to be left off, credentials masked before the cut (which could leave half of one).
    Formatted only on failure, so a job that succeeds pays nothing for it."""
    parts = [scrubbed(part) for part in traceback.format_exception(exc)]
    kept: list[str] = []
    size = 0
    for part in reversed(parts):
        if size + len(part) > TRACEBACK_CHARS - _MARK_CHARS:
            break
        kept.append(part)
        size += len(part)
    if not kept:  # the exception's line alone is over the bound: its start says the most
        kept.append(parts[-1][: TRACEBACK_CHARS - _MARK_CHARS - 2] + "…\n")
    left = sum(part.count("\n") for part in parts[: len(parts) - len(kept)])
    if left:
        kept.append(f"[{left} outer lines of this traceback left off]\n")
    return storable_text("".join(reversed(kept)))


def describe_error(exc: BaseException, job_id: str, trace: str | None = None) -> ErrorPayload:
    """The stored `last_error` of a failure: an engine error's own payload, and any other
    exception a body raised under `JOB_FAILED`; its text made storable either way. `trace` (a
    body's exception: `failure_traceback`) goes in `details.traceback`."""
    if not isinstance(exc, JobsError):
        exc = JobFailedError(job_id, failure_text(exc), type(exc).__name__, trace)
        return storable_payload(exc.to_payload())
    payload = exc.to_payload()
    if trace is not None:
        payload = payload.model_copy(
            update={"details": {**(payload.details or {}), "traceback": trace}}
        )
    return storable_payload(payload)


def storable_payload(payload: ErrorPayload) -> ErrorPayload:
    """`payload` with its text made storable and its cause's credentials masked, and its details
    dropped when they are not strict JSON (an error raised by a job's own code may carry
    anything there)."""
    details = payload.details
    if details is not None and find_unstorable(details) is not None:
        details = None
    return payload.model_copy(
        update={
            "cause": storable_text(scrubbed(payload.cause)),
            "fix": storable_text(payload.fix),
            "details": details,
        }
    )


def error_line(error: ErrorPayload) -> str:
    """An error as the one line a log or event carries: "CODE: cause", or for an exception a
    body raised its "ExceptionType: text" (its code is in the event's `error_code`)."""
    if error.code == JobFailedError.code:
        return error.cause
    return f"{error.code}: {error.cause}"


async def execute(
    rt: Runtime,
    claimed: ClaimedJob,
    definition: JobDefinition[Any] | None,
    handle: RunHandle | None = None,
) -> WorkerEventKind:
    """Run one claimed job and settle it; returns what happened to it.

    The caller keeps the lease alive (`LeaseKeeper.beat` over everything in flight): one heartbeat
    loop per worker rather than a helper task per job keeps the per-job cost down.
    """
    record = claimed.record
    handle = handle or RunHandle(claimed)

    def emit(kind: WorkerEventKind, **fields: Any) -> WorkerEventKind:
        if not rt.wants(kind):
            return kind
        error: ErrorPayload | None = fields.pop("error", None)
        if error is not None:
            fields.update(error=error_line(error), error_code=error.code)
        rt.emit(
            WorkerEvent.of(kind, record, at=rt.clock.now_ms(), worker_id=rt.worker_id, **fields)
        )
        return kind

    async def refused(**fields: Any) -> WorkerEventKind:
        """A write refused as no longer this worker's: an operator's cancel that landed while
        the body ran (the job reads cancelled), else a lease that ran out."""
        if await _reads_cancelled(rt, record.id):
            fields.update(reason="cancelled by an operator")
            return emit("cancelled", **fields)
        return emit("lease_lost", **fields)

    async def settle(options: NackOptions, kind: WorkerEventKind, **fields: Any) -> WorkerEventKind:
        async def nack() -> None:
            await rt.driver.nack(record.id, claimed.token, options)

        try:
            await until_written(rt.clock, f"job {record.id} ({record.name})", nack)
        except JobSlotLostError:
            return await refused(reason=f"nack refused after {kind}")
        return emit(kind, **fields)

    if definition is None:
        # Park, do not burn an attempt: a worker next to this one may know the name (rule 7).
        unknown = describe_error(JobUnknownError(record.name, rt.known_names()), record.id)
        return await settle(
            NackOptions(
                delay_ms=UNKNOWN_NAME_PARK_MS, error=unknown, counts_as_attempt=False, park=True
            ),
            "parked",
            reason="unknown job name",
            park_reason="unknown_name",
        )
    if record.attempt > record.max_attempts:
        # A lease that kept expiring gets here (the body never got to report a failure), or a
        # max_attempts lowered by hand below the runs the job already had.
        lost = JobSlotLostError(record.id).to_payload()
        if record.attempt == record.max_attempts + 1:
            # Not "the workers died": a body blocking its loop loses its lease the same way,
            # and the event the heartbeat left says which (late_heartbeat).
            cause = (
                f"the lease of job {record.id} expired on each of its {record.max_attempts} "
                "attempts: the worker running it died, or its event loop was blocked (a body "
                f"running blocking code) and could not renew the lease; a {HEARTBEAT_LATE} "
                "event in the job's history says it was blocked"
            )
        else:
            cause = (
                f"job {record.id} was claimed for attempt {record.attempt}, past the "
                f"{record.max_attempts} its row allows (max_attempts was lowered after it ran)"
            )
        error = lost.model_copy(update={"cause": cause, "retryable": False})
        # This claim runs no body, so it gives its count back as a shed does: the dead row shows
        # the attempts it had (3/3), not the claim that found them spent (4/3).
        options = NackOptions(error=error, dead_letter=True, counts_as_attempt=False)
        return await settle(options, "dead", error=error)
    try:
        job_input = definition.input_model.model_validate(record.input)
    except ValidationError as exc:
        invalid = JobInputInvalidError(
            record.name, exc.errors(include_url=False, include_context=False, include_input=False)
        )
        error = describe_error(invalid, record.id)
        return await settle(NackOptions(error=error, fail=True), "failed", error=error)

    started = rt.clock.now_ms()
    emit("claimed")
    ctx = RunContext(claimed, rt.settler, rt.clock, rt.driver, rt.max_output_bytes)

    if definition.timeout_ms is None:
        output, failure, suspension = await _run_body(
            definition, job_input, ctx, handle, record, rt.max_output_bytes
        )
    else:
        async with _deadline(rt.clock, definition.timeout_ms, handle):
            output, failure, suspension = await _run_body(
                definition, job_input, ctx, handle, record, rt.max_output_bytes
            )
    handle.body_done()
    reporter = ctx.reported
    if reporter is not None and reporter.active:
        await _end_progress(reporter, handle)
    if handle.torn:
        raise asyncio.CancelledError("the worker tore this run down; its lease will expire")
    duration = rt.clock.now_ms() - started

    if handle.reason == "cancelled":
        return emit("cancelled", duration_ms=duration, reason="cancelled by an operator")
    if handle.reason == "lease_lost" or isinstance(failure, JobSlotLostError):
        return await refused(duration_ms=duration)
    if handle.reason == "drain":
        # Handed back unharmed: no attempt burned, no error, still ready and still counted.
        return await settle(
            NackOptions(counts_as_attempt=False, handed_back=True),
            "handed_back",
            reason="worker draining",
        )
    if handle.reason == "timeout" and definition.timeout_ms is not None:
        failure = JobTimeoutError(record.name, definition.timeout_ms)
    if isinstance(suspension, EventSuspension):
        return await _park_for_event(rt, claimed, suspension, settle, duration)
    if suspension is not None:
        delay = max(0, suspension.wake_at - rt.clock.now_ms())
        return await settle(
            NackOptions(delay_ms=delay, counts_as_attempt=False, park=True),
            "parked",
            duration_ms=duration,
            reason=f"step {suspension.step!r} sleeping",
            park_reason="sleep",
        )
    if failure is not None:
        options, kind, reason = _after_failure(definition, record, failure)
        # The body's exception rides on the event for the log line's traceback; an error the
        # engine made (a timeout) was never raised and has none.
        raised = failure if failure.__traceback__ is not None else None
        # A Permanent is the app's verdict on its input, not a crash: a WARNING line
        # (engine.observe.log_listener), its reason the app's message (`_after_failure`).
        permanent = True if isinstance(failure, Permanent) else None
        return await settle(
            options,
            kind,
            duration_ms=duration,
            error=options.error,
            reason=reason,
            permanent=permanent,
            exc=raised,
        )

    async def ack() -> None:
        await rt.settler.ack(record.id, claimed.token, output)

    try:
        await until_written(rt.clock, f"job {record.id} ({record.name})", ack)
    except JobSlotLostError:
        return await refused(duration_ms=duration, reason="ack refused")
    except JobsError as exc:
        # The database refused this output alone (JOB_OUTPUT_INVALID): fail the job for good
        # rather than leave it running, to be re-run when its lease expires.
        error = describe_error(exc, record.id)
        return await settle(
            NackOptions(error=error, fail=True), "failed", duration_ms=duration, error=error
        )
    return emit("succeeded", duration_ms=duration)


async def _park_for_event(
    rt: Runtime,
    claimed: ClaimedJob,
    suspension: EventSuspension,
    settle: Callable[..., Awaitable[WorkerEventKind]],
    duration: int,
) -> WorkerEventKind:
    """Park until the wait's timeout, then look for the event once more: a send that committed
    after the step's look but before this park found the job running and woke nothing."""
    delay = max(0, suspension.wake_at - rt.clock.now_ms())
    name, key, tenant_id = suspension.event
    kind = await settle(
        NackOptions(delay_ms=delay, counts_as_attempt=False, park=True),
        "parked",
        duration_ms=duration,
        reason=f"step {suspension.step!r} waiting for event {name!r}",
        park_reason="event",
    )
    if kind == "parked":
        store = require(rt.driver, EVENTS)
        found = await store.first_event(
            name, key, tenant_id, suspension.started_at, suspension.after
        )
        if found is not None:
            await store.wake_waiter(claimed.record.id, rt.clock.now_ms())
    return kind


async def _run_body(
    definition: JobDefinition[Any],
    job_input: Any,
    ctx: JobContext,
    handle: RunHandle,
    record: JobRecord,
    bound: int,
) -> tuple[Any, BaseException | None, StepSuspension | None]:
    """The body under its stop switch and span: (output, failure, suspension)."""
    handle.in_body = True
    try:
        with handle.scope, run_span(record) as span:
            try:
                output = _stored_output(record, await definition(job_input, ctx), bound, ctx)
            except StepSuspension as exc:
                return None, None, exc
            except asyncio.CancelledError as exc:
                if handle.scope.cancel_called or _cancelling():
                    raise  # the worker's own stop, timeout or cancel: it ends the run
                span.failed(exc)  # the body's own (a task it cancelled and awaited)
                return None, exc, None
            except (Exception, SystemExit) as exc:
                # SystemExit too (argparse's parser.error): it fails this job, not the worker
                # and the jobs running beside it.
                span.failed(exc)
                return None, exc, None
            return output, None, None
    finally:
        handle.in_body = False
    # Reached only when the stop switch cancelled the body: nothing came of it.
    return None, None, None


def _stored_output(record: JobRecord, value: Any, bound: int, ctx: JobContext) -> Any:
    """The body's output as stored (`storable_output`), its refusal past the engine's bound
    naming the driver's own setting too where the job's record cannot hold it as set."""
    try:
        return storable_output(record.name, "the job", value, bound)
    except JobOutputTooLargeError as exc:
        mend_output(exc, ctx.driver, record.id)
        raise


def _cancelling() -> bool:
    """Whether someone asked this task to stop (the worker tearing it down)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


async def _end_progress(reporter: ProgressReporter, handle: RunHandle) -> None:
    """A run that goes on to settle stores its last report first (its token still holds the
    job); a stopped one drops it."""
    if handle.torn or handle.reason in ("cancelled", "lease_lost"):
        reporter.abandon()
        return
    try:
        await reporter.finish()
    except BaseException:
        reporter.abandon()  # torn down mid-write: leave no flush behind
        raise


def _after_failure(
    definition: JobDefinition[Any], record: JobRecord, failure: BaseException
) -> tuple[NackOptions, WorkerEventKind, str | None]:
    """How a failed run goes back: failed for good (a `Permanent` or a terminal engine error),
    dead after its last attempt, else retried after the policy's delay (rule 12)."""
    trace = failure_traceback(failure) if failure.__traceback__ is not None else None
    error = describe_error(failure, record.id, trace)
    if isinstance(failure, Permanent):
        # Its message as the reason: the one line logged for it (no traceback) says it.
        return NackOptions(error=error, fail=True), "failed", error_line(error)
    if isinstance(failure, JobsError) and not failure.retryable:
        return NackOptions(error=error, fail=True), "failed", None
    if record.attempt >= record.max_attempts:
        return NackOptions(error=error, dead_letter=True), "dead", None
    delay = retry_delay_ms(definition.retry, record.attempt)
    return NackOptions(delay_ms=delay, error=error), "retried", f"next attempt in {delay} ms"


async def late_heartbeat(rt: Runtime, late_ms: int, handles: Iterable[RunHandle]) -> None:
    """Say that the heartbeat ran `late_ms` late: the event loop was blocked (a job body
    running blocking code, most often) or the clock jumped. A warning in this worker's log, and
    an event in the history of each job then running, which is where an agent asking why the
    job ran again (inspect_job) looks."""
    running = [h.claimed.record for h in handles]
    named = ", ".join(f"{r.id} ({r.name})" for r in running[:_NAMED_LATE])
    more = f" and {len(running) - _NAMED_LATE} more" if len(running) > _NAMED_LATE else ""
    logger.warning(
        "the lease heartbeat ran %.1f s late (a lease is %.1f s) while %s%s ran: %s",
        late_ms / 1000,
        rt.lease_ms / 1000,
        named,
        more,
        _BLOCKED,
    )
    at = rt.clock.now_ms()
    data = {"late_ms": late_ms, "lease_ms": rt.lease_ms, "cause": _BLOCKED}
    for record in running:
        event = EventRecord(
            job_id=record.id,
            at=at,
            kind=HEARTBEAT_LATE,
            actor=rt.worker_id,
            tenant_id=record.tenant_id,
            data=data,
        )
        await rt.driver.record_event(event)


@asynccontextmanager
async def _deadline(clock: Clock, timeout_ms: int, handle: RunHandle) -> AsyncIterator[None]:
    """Stop the body when the job's timeout passes on the clock (rule 8)."""

    async def watchdog() -> None:
        await clock.sleep_ms(timeout_ms)
        handle.stop("timeout")

    async with anyio.create_task_group() as tg:
        tg.start_soon(watchdog)
        try:
            yield
        finally:
            tg.cancel_scope.cancel()


async def _reads_cancelled(rt: Runtime, job_id: str) -> bool:
    try:
        return (await rt.driver.get(job_id)).state == "cancelled"
    except JobsError:
        return False  # unreadable now: the lease's loss is what this worker knows
