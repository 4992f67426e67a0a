"""The job operations: describe, list, inspect, wait for, enqueue, retry, cancel.

Each is a plain async function over a `Scope` that validates, calls the engine and shapes the
result model, so the MCP tools and the CLI run the very same code and answer the same envelope.
"""

from __future__ import annotations

import json
import math
from typing import Any

from engine.bounds import MAX_KEY_BYTES
from engine.call_retries import within
from engine.driver_errors import StoreDamagedError
from engine.errors import (
    CursorInvalidError,
    InvalidArgumentError,
    JobNotCancellableError,
    JobNotRetryableError,
    JobUnknownError,
)
from engine.internal_jobs import is_internal, refuse_by_name
from engine.paging import DEFAULT_TRACE_PAGE, names_cursor, parse_names_cursor
from engine.shell_words import shell_word
from engine.tasks import describe_known, task_roster
from mcp_jobs.config import SHOWN
from mcp_jobs.errors import ComputedKeyInvalidError, LimitExceededError, example_call
from mcp_jobs.operations.answer_bounds import checked_limit
from mcp_jobs.operations.attempts import AttemptCounter
from mcp_jobs.operations.cursors import refuse_foreign
from mcp_jobs.operations.dedupe_notice import other_call_notice, stored_form
from mcp_jobs.operations.job_input import refuse_coerced
from mcp_jobs.operations.known import unknown_filter
from mcp_jobs.operations.meant_job import meant_checked
from mcp_jobs.operations.models import (
    CancelJobResult,
    DescribeJobsResult,
    EnqueueJobResult,
    Finding,
    InspectJobResult,
    JobProgressSummary,
    JobSummary,
    LeaseInfo,
    ListJobsResult,
    RetryJobResult,
    WaitForJobResult,
)
from mcp_jobs.operations.pause_notice import held_by_pause, held_notices, pauses_for
from mcp_jobs.operations.pauses import holding, pauses_in_force
from mcp_jobs.operations.progress import JobProgressNotes
from mcp_jobs.operations.reruns import refuse_run_cursor, run_trace
from mcp_jobs.operations.scope import Scope
from mcp_jobs.operations.tenant_spelling import tenant_spelt_otherwise
from mcp_jobs.operations.together import together
from mcp_jobs.operations.workers import no_worker_notice
from schemas.errors import NextCall
from schemas.jobs import DamagedJob, JobPage, OnConflict
from schemas.states import SETTLED_STATES, JobState

# How often wait_for_job reads the job while it waits.
WAIT_POLL_MS = 200
# Next occurrences each task of a describe_jobs page lists (one described by name: the default).
LISTED_NEXT = 3


async def describe_jobs(
    scope: Scope, name: str | None = None, *, limit: int = SHOWN, cursor: str | None = None
) -> DescribeJobsResult:
    """The jobs this server can enqueue: registered here (`source: "registry"`), or published by
    a worker that has the code (`source: "published"`, `stale` when no live worker did lately).
    Not the engine's own jobs (a backfill's pass): they are started through their own tools.
    Jobs and cron tasks (declared here or published) page together by name: `limit` names a
    page, `cursor` (the page before's next_cursor) says the name it ended with; a name both a
    job and a task has comes with both. A listed task shows LISTED_NEXT occurrences and the
    start of its description; one named, all of it."""
    refuse_by_name(name, None)
    last = _names_after(scope, name, limit, cursor)
    call = {k: v for k, v in {"name": name, "cursor": cursor}.items() if v is not None}
    limit = checked_limit(scope, "describe_jobs", limit, call)
    roster = await task_roster(scope.jobs)
    tenant = scope.tenant(None)
    if name is not None:
        named = [t for t in roster if t.name == name]
        if named:
            # A cron task's name (`jobs describe nightly`): the task, and a job of that name if any.
            tasks = await describe_known(scope.jobs, named, tenant_id=tenant)
            try:
                descriptors = await scope.jobs.describe(name)
            except JobUnknownError:
                descriptors = []
        else:
            try:
                descriptors, tasks = await scope.jobs.describe(name), None
            except JobUnknownError as exc:
                if not roster:
                    raise
                # A slip in a task's name (`jobs describe nightly-imprt`) is meant as the task:
                # the names listed, and the one meant, are the tasks' too.
                jobs = (exc.details or {}).get("known", [])
                raise JobUnknownError(name, [*jobs, *(t.name for t in roster)]) from None
        descriptors = [d for d in descriptors if not is_internal(d.name)]
        held = holding(await pauses_in_force(scope), descriptors)
        return DescribeJobsResult(ok=True, jobs=descriptors, tasks=tasks, paused=held or None)
    after = [
        d
        for d in await scope.jobs.describe()
        if not is_internal(d.name) and (last is None or d.name > last)
    ]
    later = [t for t in roster if last is None or t.name > last]
    names = sorted({d.name for d in after} | {t.name for t in later})
    page = set(names[:limit])
    descriptors = sorted((d for d in after if d.name in page), key=lambda d: d.name)
    listed = [t for t in later if t.name in page]
    tasks = await describe_known(
        scope.jobs, listed, count=LISTED_NEXT, tenant_id=tenant, listed=True
    )
    held = holding(await pauses_in_force(scope), descriptors)
    return DescribeJobsResult(
        ok=True,
        jobs=descriptors,
        next_cursor=names_cursor(names[limit - 1]) if len(names) > limit else None,
        # The first page always says what tasks there are, none included; a later one, its own.
        tasks=tasks if tasks or cursor is None else None,
        paused=held or None,
    )


def _names_after(scope: Scope, name: str | None, limit: int, cursor: str | None) -> str | None:
    """The name a describe_jobs page starts after, from `cursor` when it is one describe_jobs
    handed out. Refused before the limit is (a LIMIT_EXCEEDED fix keeps the cursor): another
    tool's cursor is CURSOR_WRONG_TOOL, any other text CURSOR_INVALID, the fix the first page."""
    if cursor is None:
        return None
    first: dict[str, Any] = {} if name is None else {"name": name}
    if isinstance(limit, int) and not isinstance(limit, bool):
        size = min(max(limit, 1), scope.settings.limits.max_page_size)  # the page it takes
        if size != SHOWN:
            first["limit"] = size
    call = NextCall(tool="describe_jobs", arguments=first)
    refuse_foreign("describe_jobs", "cursor", cursor, call)
    return parse_names_cursor(cursor, call)


async def list_jobs(
    scope: Scope,
    *,
    state: JobState | list[JobState] | None = None,
    name: str | None = None,
    queue: str | None = None,
    tenant_id: str | None = None,
    limit: int = 50,
    cursor: str | None = None,
) -> ListJobsResult:
    """A page of jobs, newest first. A `name` or `queue` filter that nothing knows is an error
    listing the known ones (JOB_UNKNOWN, QUEUE_UNKNOWN), never an empty page that looks fine."""
    cap = scope.settings.limits.max_page_size
    if isinstance(limit, int) and not isinstance(limit, bool) and not 1 <= limit <= cap:
        if cursor is not None:
            # A cursor that does not go with these filters is refused first (its fix: the first
            # page), so the fix below, which keeps the cursor, runs as given.
            await _listed(
                scope,
                state=state,
                name=name,
                queue=queue,
                tenant_id=scope.tenant(tenant_id),
                limit=min(max(limit, 1), cap),
                cursor=cursor,
            )
        if limit < 1:
            # This server's cap, not the engine's own bound (which only a direct caller meets).
            raise InvalidArgumentError("limit", limit, f"a whole number from 1 to {cap}", nearest=1)
        asked = {"state": state, "name": name, "queue": queue, "tenant_id": tenant_id}
        call = {k: v for k, v in {**asked, "cursor": cursor}.items() if v is not None}
        # A tool call; the CLI's FixContext writes it as `mcp-jobs jobs ls …`, cursor kept.
        fix = f"list_jobs {example_call({**call, 'limit': cap})}"
        raise LimitExceededError("limit", limit, cap, "rows", fix)
    tenant = scope.tenant(tenant_id)
    page = await _listed(
        scope,
        state=state,
        name=name,
        queue=queue,
        tenant_id=tenant,
        limit=limit,
        cursor=cursor,
    )
    notices = [damaged_notice(d) for d in page.damaged]
    if not page.jobs and not page.damaged and cursor is None:
        unknown = await unknown_filter(scope, name, queue, tenant)
        if unknown is not None:
            raise unknown
        notices = await tenant_spelt_otherwise(
            scope, tenant_id, state=state, name=name, queue=queue, limit=limit
        )
    return ListJobsResult(
        ok=True,
        jobs=[JobProgressSummary.of(j) for j in page.jobs],
        next_cursor=page.next_cursor,
        notices=notices or None,
    )


async def _listed(scope: Scope, cursor: str | None, **filters: Any) -> JobPage:
    """`scope.jobs.list`, a cursor another tool handed out refused naming that tool."""
    try:
        return await scope.jobs.list(cursor=cursor, **filters)
    except CursorInvalidError as exc:
        if exc.next_call is not None:
            refuse_foreign("list_jobs", "cursor", cursor, exc.next_call)
        raise


def damaged_notice(job: DamagedJob) -> Finding:
    """A row of a page that cannot be read: named, with the driver's STORE_DAMAGED fix."""
    return Finding(
        code=StoreDamagedError.code,
        severity="critical",
        cause=f"job {job.id} cannot be read: {job.cause}",
        fix=job.fix,
        job_ids=[job.id],
    )


async def inspect_job(
    scope: Scope,
    job_id: str,
    *,
    steps_limit: int = DEFAULT_TRACE_PAGE,
    steps_cursor: str | None = None,
    events_limit: int = DEFAULT_TRACE_PAGE,
    events_cursor: str | None = None,
    run_id: str | None = None,
) -> InspectJobResult:
    """The record and a page of its steps and events (the newest; cursors for older ones).
    `run_id` names an earlier run of the job (`rerun_of`) whose steps to show instead."""
    if run_id is not None:
        refuse_run_cursor(steps_cursor)
    try:
        trace = await scope.jobs.trace(
            job_id,
            tenant_id=scope.tenant(None),
            steps_limit=steps_limit,
            steps_cursor=steps_cursor,
            events_limit=events_limit,
            events_cursor=events_cursor,
        )
    except CursorInvalidError as exc:
        argument = (exc.details or {}).get("argument")
        given = {"steps_cursor": steps_cursor, "events_cursor": events_cursor}.get(argument or "")
        if exc.next_call is not None and argument is not None:
            refuse_foreign("inspect_job", argument, given, exc.next_call)
        raise
    if run_id is not None and run_id != trace.job.run_id:
        trace = await run_trace(scope, trace, run_id, steps_limit)
    job = trace.job
    now = scope.jobs.clock.now_ms()
    lease = None
    if job.state == "running" and job.lease_expires_at is not None:
        lease = LeaseInfo(
            worker_id=job.worker_id,
            expires_at=job.lease_expires_at,
            expired=job.lease_expires_at <= now,
        )
    pending = job.state in ("ready", "delayed", "suspended")
    return InspectJobResult(
        ok=True,
        job=job,
        steps=trace.steps,
        events=trace.events,
        steps_total=trace.steps_total,
        events_total=trace.events_total,
        steps_cursor=trace.steps_cursor,
        events_cursor=trace.events_cursor,
        lease=lease,
        retry_delays_ms=trace.retry_delays_ms,
        next_attempt_at=job.run_at if pending else None,
        registered=trace.registered,
    )


async def wait_for_job(
    scope: Scope, job_id: str, timeout_seconds: float | None = None
) -> WaitForJobResult:
    """Poll until the job settles or the (bounded) wait runs out; a timeout is not an error —
    the job is simply still going, and `settled` says so."""
    limits = scope.settings.limits
    timeout = limits.default_wait_seconds if timeout_seconds is None else timeout_seconds
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout >= 0:
        raise InvalidArgumentError("timeout_seconds", timeout, "a number of seconds ≥ 0")
    if timeout > limits.max_wait_seconds or math.isinf(timeout):
        cap = int(limits.max_wait_seconds)
        raise LimitExceededError(
            "timeout_seconds",
            timeout,
            cap,
            "seconds",
            f"wait_for_job {example_call({'job_id': job_id, 'timeout_seconds': cap})}",
        )
    tenant = scope.tenant(None)
    clock = scope.jobs.clock
    started = clock.now_ms()
    total_ms = int(timeout * 1000)
    deadline = started + total_ms
    attempts = AttemptCounter()
    reports = JobProgressNotes()
    # Asked for N seconds, answered in about N: the retries inside stop at the bound too.
    with within(clock, total_ms):
        while True:
            record = await scope.jobs.get(job_id, tenant_id=tenant)
            now = clock.now_ms()
            waited = now - started
            settled = record.state in SETTLED_STATES
            # A job no live worker serves never moves: say so, with the line that starts one.
            notice = (
                None
                if settled
                else await no_worker_notice(scope, record.queue, f"job {job_id}", [job_id])
            )
            if settled or now >= deadline:
                await reports.last(scope, record.progress, record.state)
                # Timed out on a job a pause holds: the pause is why (read once, at the end).
                held = held_by_pause(record.state, record.run_at, now)
                pauses = await pauses_for(scope, held)
                held_notes = held_notices(scope, pauses, record.queue, record.name, [job_id])
                notices = held_notes + ([notice] if notice is not None else [])
                return WaitForJobResult(
                    ok=True,
                    settled=settled,
                    job=JobProgressSummary.of(record),
                    output=record.output if settled else None,
                    waited_ms=waited,
                    notices=notices or None,
                )
            line = attempts.line(record)
            if notice is not None:
                line += f": no live worker serves queue {record.queue} ({notice.fix})"
            await reports.send(scope, record.progress, line)  # the job's own numbers, if any
            await clock.sleep_ms(min(WAIT_POLL_MS, deadline - now))


# enqueue_job's arguments that the engine's enqueue names otherwise.
_ENGINE_NAMES = {"delay": "delay_seconds", "job": "name"}
# What the engine calls the key a registered job computes from its input (`key_for`).
_COMPUTED_KEY = "idempotency_key"


async def enqueue_job(
    scope: Scope,
    name: str,
    input: dict[str, Any],
    *,
    tenant_id: str | None = None,
    delay_seconds: float | None = None,
    run_at: int | str | None = None,
    on_conflict: OnConflict = "dedupe",
    key: str | None = None,
    priority: int | None = None,
) -> EnqueueJobResult:
    size = len(json.dumps(input, separators=(",", ":"), default=str).encode())
    cap = scope.settings.limits.max_input_bytes
    if size > cap:
        raise LimitExceededError(
            "input",
            size,
            cap,
            "bytes",
            f"enqueue_job {example_call({'name': name, 'input': '<input>'})}",
            why="an input holds the job's arguments: keep its data in your own storage and "
            "pass the data's id",
        )
    tenant = scope.tenant(tenant_id)
    refuse_coerced(scope.jobs.registry, name, input)
    try:
        result = await scope.jobs.enqueue(
            name,
            input,
            tenant_id=tenant,
            delay=delay_seconds,
            run_at=run_at,
            on_conflict=on_conflict,
            key=key,
            priority=priority,
            enqueued_by=scope.actor,
            traceparent=scope.traceparent,
        )
    except JobUnknownError as exc:
        # The name meant, checked with the rest of the call: each face's fix then keeps no key
        # or input that job refuses (operations/meant_job.py).
        asked = dict(
            name=name,
            input=input,
            tenant_id=tenant_id,
            delay_seconds=delay_seconds,
            run_at=run_at,
            on_conflict=on_conflict,
            key=key,
            priority=priority,
        )
        raise await meant_checked(scope, exc, asked) from None
    except InvalidArgumentError as exc:
        if exc.argument == _COMPUTED_KEY and isinstance(exc.value, str):
            raise _key_refused(scope, name, input, exc.value, exc.expected) from None
        argument = _ENGINE_NAMES.get(exc.argument)
        if argument is None:
            raise
        # Named as this tool names it, the refusal's fix is the call mended.
        raise InvalidArgumentError(argument, exc.value, exc.expected, nearest=exc.nearest) from None
    notices: list[Finding] = []
    local = scope.jobs.registry.get(name)
    # A deduped answer names the live job: its input is read to tell the caller when it is
    # not theirs; a job known only by its published descriptor has its queue on that row.
    stored = await scope.jobs.get(result.id) if result.deduped or local is None else None
    if stored is not None and result.deduped:
        given = stored_form(scope, name, input)
        other = other_call_notice(
            scope, given, stored, priority=priority, delay_seconds=delay_seconds, run_at=run_at
        )
        notices.extend([other] if other is not None else [])
    if result.state not in SETTLED_STATES:  # a deduped answer may name a settled job
        if local is not None:
            queue = local.queue
        else:
            assert stored is not None  # read above: a job of no local definition
            queue = stored.queue
        # The pauses (a small table) are read beside the workers: no second round trip in a row.
        notice, pauses = await together(
            no_worker_notice(scope, queue, f"job {result.id}", [result.id]),
            # An enqueue answers `ready` for a job due now (no run_at: its state says it).
            pauses_for(scope, result.state == "ready"),
        )
        notices.extend(held_notices(scope, pauses, queue, name, [result.id]))
        notices.extend([notice] if notice is not None else [])
    return EnqueueJobResult(
        ok=True,
        job_id=result.id,
        run_id=result.run_id,
        name=name,
        tenant_id=tenant,
        state=result.state,
        deduped=result.deduped,
        notices=notices or None,
    )


def _key_refused(
    scope: Scope, name: str, input: dict[str, Any], key: str, expected: str
) -> ComputedKeyInvalidError:
    """The refusal of the key job `name` computed from `input`, naming what to shorten: the
    fewest of the input's fields the key holds, longest first, without which it would fit."""
    size = _bytes(key)
    # As a key function's f-string writes a value: str() of it.
    held = [(field, _bytes(str(value))) for field, value in input.items() if str(value) in key]
    fields: list[str] = []
    for field, length in sorted(held, key=lambda pair: -pair[1]):
        if size <= MAX_KEY_BYTES:
            break
        fields.append(field)
        size -= length
    definition = scope.jobs.registry.get(name)
    code = getattr(definition.idempotency_key, "__code__", None) if definition else None
    where = None
    if definition is not None and code is not None:
        where = f"idempotency_key of {definition.qualified_name}, line {code.co_firstlineno}"
    # A key too long however the fields are cut (or refused for a character): none to name.
    return ComputedKeyInvalidError(
        name, key, expected, input, fields if size <= MAX_KEY_BYTES else [], where
    )


def _bytes(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


async def retry_job(
    scope: Scope, job_id: str, include_cancelled: bool = False, from_step: str | None = None
) -> RetryJobResult:
    """Requeue in the same run; with `from_step`, rerun in a new run (engine/reruns.py)."""
    try:
        record = await scope.jobs.retry(
            job_id,
            tenant_id=scope.tenant(None),
            include_cancelled=include_cancelled,
            actor=scope.actor,
            from_step=from_step,
        )
    except JobNotRetryableError as exc:
        raise _rerun_kept(exc, from_step) from None
    return RetryJobResult(
        ok=True, job=JobSummary.of(record), rerun_of=record.rerun_of if from_step else None
    )


def _rerun_kept(exc: JobNotRetryableError, from_step: str | None) -> JobNotRetryableError:
    """`exc` with its fix and next_call still a rerun from `from_step`: for a cancelled job the
    engine offers a plain retry (`include_cancelled`), which would requeue the run as it was."""
    call = exc.next_call
    if from_step is None or call is None or call.tool != "retry_job":
        return exc
    exc.next_call = NextCall(tool=call.tool, arguments={**call.arguments, "from_step": from_step})
    exc.fix = f"{exc.fix} --from-step {shell_word(from_step)}"
    return exc


async def cancel_job(scope: Scope, job_id: str) -> CancelJobResult:
    """Cancel a live job. Cancelling a cancelled job again is the same outcome, so it answers ok
    with `already_cancelled: true` (the tool is annotated idempotent); a job that settled
    otherwise (done, failed, dead) stays JOB_NOT_CANCELLABLE."""
    tenant = scope.tenant(None)
    try:
        record = await scope.jobs.cancel(job_id, tenant_id=tenant, actor=scope.actor)
    except JobNotCancellableError as exc:
        if (exc.details or {}).get("state") != "cancelled":
            raise
        record = await scope.jobs.get(job_id, tenant_id=tenant)
        if record.state != "cancelled":  # retried in between: the refusal stands as it was
            raise
        return CancelJobResult(
            ok=True,
            job=JobSummary.of(record),
            stopping=record.cancel_requested,
            already_cancelled=True,
        )
    return CancelJobResult(
        ok=True,
        job=JobSummary.of(record),
        stopping=record.cancel_requested,
        already_cancelled=False,
    )
