"""The CLI's one-shot commands: `jobs`, `backfill`, `db`. They run the same operations as the MCP
tools (through a `Scope` with actor `cli`), so `--json` prints exactly the envelope a tool returns.
"""

from __future__ import annotations

import argparse
import logging
import math
import re
import signal
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any, TypeVar

import anyio
from anyio.abc import TaskStatus

from engine.client import Jobs, connect
from engine.drivers.installed import InstalledStore
from engine.drivers.schema_versions import VersionedSchema
from engine.drivers.urls import redact
from engine.errors import InvalidArgumentError
from engine.logs import configure_logging
from engine.retention import meant_duration
from engine.shell_words import shell_join
from mcp_jobs import operations
from mcp_jobs.app_modules import load_apps
from mcp_jobs.cli.database_file import require_database
from mcp_jobs.cli.database_installed import require_installed
from mcp_jobs.cli.db_report import refuse_unusable
from mcp_jobs.cli.exit_status import (
    INTERRUPTED_EXIT,
    JOBS_FAILED_EXIT,
    WAIT_ENDED_EXIT,
    exit_status,
)
from mcp_jobs.cli.json_flag import json_object
from mcp_jobs.cli.mend import fix_words, mended, refusal_context, typed_words, with_value
from mcp_jobs.cli.rehearsal import REHEARSAL_URL, input_refusal, rehearsing
from mcp_jobs.cli.render import ProgressBar, print_error, print_json, print_text
from mcp_jobs.config import Settings
from mcp_jobs.errors import CommandLineInvalidError
from mcp_jobs.fix_context import FixContext, written_by_face
from mcp_jobs.operations.backfills import follow_write
from mcp_jobs.operations.bulk import BulkAction, BulkFilter, BulkJobsResult, bulk_command
from mcp_jobs.operations.database import report_of
from mcp_jobs.operations.envelope import error_payload, failure, success
from mcp_jobs.operations.models import (
    DbReportResult,
    Envelope,
    ListJobsResult,
    MigrateResult,
    NatsReportResult,
    RunBackfillResult,
)
from mcp_jobs.operations.scope import Scope
from mcp_jobs.operations.tenant_spelling import CODE as TENANT_SPELT

# What `jobs enqueue --input` takes.
INPUT_EXPECTED = "the job's input as a JSON object ('{\"order_id\": 1}')"
# How long `backfill NAME --write` follows the pass at a terminal, when a worker is live.
FOLLOW_SECONDS = 600.0


@asynccontextmanager
async def open_jobs(
    settings: Settings, *, migrate: bool = True, creates: bool = False
) -> AsyncIterator[Jobs]:
    """The database `settings` names, with the apps imported. Only a command that starts
    something on purpose `creates` a SQLite file that is not there (`database_file`)."""
    load_apps(settings.apps)
    rehearsal = rehearsing()
    if not (creates or rehearsal):
        require_database(settings.url)
    jobs = written_by_face(
        await connect(REHEARSAL_URL if rehearsal else settings.url, migrate=False)
    )
    try:
        if not (creates or rehearsal):
            # On the command's own connection, before a migrate would install the store.
            await require_installed(jobs.driver, settings.url)
        if migrate:
            await jobs.migrate()
        yield jobs
    finally:
        await jobs.close()


def scope_of(jobs: Jobs, settings: Settings, command: str, bar: ProgressBar | None = None) -> Scope:
    if bar is None:
        return Scope(jobs=jobs, settings=settings, tool=command, actor="cli", face="cli")
    return Scope(
        jobs=jobs, settings=settings, tool=command, actor="cli", progress=bar.update, face="cli"
    )


# --- output -------------------------------------------------------------------------------------


def emit(
    kind: str, envelope: dict[str, Any], as_json: bool, fixes: FixContext | None = None
) -> int:
    if as_json:
        print_json(envelope)
    elif envelope["ok"]:
        print_text(kind, envelope, fixes=fixes)
    else:
        print_error(envelope["error"])
    return exit_status(envelope)


async def guarded(
    kind: str, as_json: bool, run: Callable[[], Awaitable[Envelope]], settings: Settings
) -> int:
    """Run a command; any failure prints as the same envelope (or code/cause/fix) and exits
    non-zero (`exit_status`). Every fix it prints is a command that runs as given (`FixContext`)."""
    envelope, fixes = await answer_of(kind, run, settings)
    return emit(kind, envelope, as_json, fixes)


async def answer_of(
    kind: str, run: Callable[[], Awaitable[Envelope]], settings: Settings
) -> tuple[dict[str, Any], FixContext]:
    """`run`'s envelope, or its failure's, and the context its fixes were written in."""
    # Each context is taken once `run` has imported the app: its declared environment counts.
    try:
        model = await run()
        fixes = FixContext.of(settings, face="cli")
        return success(fixes.qualify_all(model)), fixes
    except Exception as exc:  # every failure is shown as an envelope; tracebacks go to the log
        exc = await input_refusal(kind, run, exc) or exc
        fixes = refusal_context(settings)
        # A value refused after one of the command's flags comes back as the command, mended.
        payload = error_payload(mended(exc, fixes), where=f"mcp-jobs {kind}", context=fixes)
        return failure(payload), fixes


# --- jobs ---------------------------------------------------------------------------------------


async def jobs_command(args: argparse.Namespace, settings: Settings) -> int:
    action: str = args.action
    kind = {
        "ls": "list_jobs",
        "show": "inspect_job",
        "retry": "retry_job",
        "cancel": "cancel_job",
        "enqueue": "enqueue_job",
        "describe": "describe_jobs",
        "stats": "queue_stats",
        "diagnose": "diagnose_queue",
        "drain": "drain",
        "retry-all": "retry_jobs",
        "cancel-all": "cancel_jobs",
    }[action]
    interrupted = ended_badly = False

    async def run() -> Envelope:
        nonlocal interrupted, ended_badly
        # Read before the database is opened: a refused input connects to nothing.
        # NaN is left to the job's input rule, which names the field (JOB_INPUT_INVALID).
        job_input = (
            json_object("input", args.input, INPUT_EXPECTED, non_finite=True)
            if action == "enqueue"
            else {}
        )
        async with open_jobs(settings) as jobs:
            scope = scope_of(jobs, settings, f"jobs {action}")
            if action == "enqueue":
                return await operations.enqueue_job(
                    scope,
                    args.name,
                    job_input,
                    delay_seconds=args.delay_seconds,
                    run_at=int(args.run_at) if (args.run_at or "").isdigit() else args.run_at,
                    on_conflict=args.on_conflict,
                    key=args.key,
                    priority=args.priority,
                )
            if action == "ls":
                listed = await operations.list_jobs(
                    scope,
                    state=args.state or None,
                    name=args.name,
                    queue=args.queue,
                    tenant_id=args.tenant_filter,
                    limit=args.limit,
                    cursor=args.cursor,
                )
                return _tenant_as_typed(listed, args.tenant_filter, scope.fixes)
            if action == "show":
                return await operations.inspect_job(scope, args.job_id, run_id=args.run_id)
            if action == "retry":
                return await operations.retry_job(
                    scope, args.job_id, args.include_cancelled, args.from_step
                )
            if action == "cancel":
                return await operations.cancel_job(scope, args.job_id)
            if action in ("retry-all", "cancel-all"):
                result = await _bulk(scope, args)
                interrupted = result.outcome is not None and bool(result.outcome.interrupted)
                return result
            if action == "describe":
                return await operations.describe_jobs(
                    scope, args.name, limit=args.limit, cursor=args.cursor
                )
            if action == "stats":
                return await operations.queue_stats(scope, args.queues, args.limit)
            if action == "diagnose":
                # A queue it does not know comes back as this command on the one meant.
                fixes = refusal_context(settings)
                return await operations.diagnose_queue(
                    scope, args.queue, mend=lambda exc: mended(exc, fixes)
                )
            bar = ProgressBar("drain", enabled=False if args.json else None)
            scope = scope_of(jobs, settings, "jobs drain", bar)
            try:
                with _logged_as_the_worker():
                    drained = await operations.drain(scope, args.queues, args.concurrency)
                ended_badly = bool(drained.notices)
                return drained
            finally:
                bar.close()

    code = await guarded(kind, args.json, run, settings)
    if code == 0 and ended_badly:
        return JOBS_FAILED_EXIT
    return INTERRUPTED_EXIT if interrupted else code


def _tenant_as_typed(
    listed: ListJobsResult, asked: str | None, fixes: FixContext
) -> ListJobsResult:
    """`listed`, a TENANT_SPELT_OTHERWISE notice's fix the line typed with the stored tenant
    in place of `asked`: the tool call's command would add a `--json` nobody typed."""
    typed = typed_words()
    notices = []
    for notice in listed.notices or ():
        call = notice.next_call
        if notice.code == TENANT_SPELT and call is not None and typed is not None:
            words = with_value(typed, {"--tenant-id"}, asked, call.arguments["tenant_id"])
            if words is not None:
                notice = notice.model_copy(update={"fix": fixes.command(*fix_words(words))})
        notices.append(notice)
    return listed.model_copy(update={"notices": notices or None})


@contextmanager
def _logged_as_the_worker() -> Iterator[None]:
    """A drain runs jobs in this process: their failures are logged as `mcp-jobs worker` logs
    them (text, credentials masked, escapes shown), not by Python's bare last resort, which
    printed the raw exception. For this command only: the handler goes when it ends."""
    root = logging.getLogger()
    level = root.level
    handler = configure_logging(json=False, level=logging.WARNING)
    try:
        yield
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


async def _bulk(scope: Scope, args: argparse.Namespace) -> BulkJobsResult:
    """`jobs retry-all|cancel-all`: the plan; --yes acts on it (`operations.bulk`)."""
    wanted = BulkFilter(
        name=args.name,
        queue=args.queue,
        tenant_id=args.tenant_filter,
        states=args.state,
        error_code=args.error_code,
        since_seconds=args.since_seconds,
    )
    words = ["jobs", args.action]
    for flag, value in (
        ("--name", args.name),
        ("--queue", args.queue),
        ("--tenant-id", args.tenant_filter),
        ("--error-code", args.error_code),
        ("--since-seconds", args.since_seconds),
    ):
        if value is not None:
            words += [flag, str(value)]
    for state in args.state or ():
        words += ["--state", state]
    action: BulkAction = "retry" if args.action == "retry-all" else "cancel"
    act = args.yes and not args.dry_run
    if not act:
        return await bulk_command(scope, action, wanted, act=False, words=words)
    stop = anyio.Event()
    return await _stoppable(
        True, stop, lambda: bulk_command(scope, action, wanted, act=True, words=words, stop=stop)
    )


async def _stop_on_signal(
    stop: anyio.Event, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED
) -> None:
    """The first Ctrl-C or SIGTERM sets `stop`: the action ends after the job in hand and says
    how far it got. A second one meets the default handlers and ends the command at once."""
    if sys.platform == "win32" or threading.current_thread() is not threading.main_thread():
        task_status.started()  # no signal handlers there: the interpreter's own behaviour
        return
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as received:
        task_status.started()
        async for _ in received:
            stop.set()
            return


# --- backfill -----------------------------------------------------------------------------------


# Each flag of `backfill` and the forms it acts in: listing (no NAME), NAME --runs, NAME (a dry
# run, or a write with --write). Anywhere else it would be silently ignored.
_BACKFILL_FLAGS: dict[str, tuple[str, frozenset[str]]] = {
    "write": ("--write", frozenset({"name"})),
    "force": ("--force", frozenset({"name"})),
    "wait": ("--wait", frozenset({"write"})),
    "pending": ("--pending", frozenset({"listing", "runs"})),
    "runs": ("--runs", frozenset({"runs"})),
    "runs_limit": ("--runs-limit", frozenset({"runs"})),
    "runs_cursor": ("--runs-cursor", frozenset({"runs"})),
}
_BACKFILL_FORMS = {
    "listing": "the listing (no NAME)",
    "runs": "NAME --runs",
    "name": "NAME",
    "write": "NAME --write",
}


def unused_backfill_flags(args: argparse.Namespace) -> CommandLineInvalidError | None:
    """The refusal of a `backfill` flag typed where it has no use (`backfill --write` lists and
    writes nothing), whose fix is the command without every such flag: never a guessed write.
    `--force` without `--write` has a use: the dry run shows what the forced write answers."""
    forms = {"listing"} if args.name is None else {"runs"} if args.runs else {"name"}
    if args.name is not None and not args.runs and args.write:
        forms.add("write")
    # Typed: a value (`--wait 0` too) or a bare flag set; None and False are flags left out.
    given = {
        key: value
        for key in _BACKFILL_FLAGS
        if (value := getattr(args, key)) is not None and value is not False
    }
    unused = [
        key for key, (_, acts) in _BACKFILL_FLAGS.items() if key in given and not acts & forms
    ]
    if not unused:
        return None
    words = ["mcp-jobs", "backfill", *([args.name] if args.name is not None else [])]
    for key, (flag, _) in _BACKFILL_FLAGS.items():
        if key in unused or key not in given:
            continue
        words += [flag] if given[key] is True else [flag, str(given[key])]
    if args.json:
        words.append("--json")
    flag, acts = _BACKFILL_FLAGS[unused[0]]
    where = " or ".join(_BACKFILL_FORMS[f] for f in sorted(acts))
    also = [_BACKFILL_FLAGS[k][0] for k in unused[1:]]
    more = f" (nor {', '.join(also)})" if also else ""
    return CommandLineInvalidError(
        "mcp-jobs backfill",
        f"argument {flag}: has no use here{more}: it acts only with {where}; given elsewhere "
        "it would be ignored, and nothing was read or started",
        fix=shell_join(words),
    )


async def backfill_command(args: argparse.Namespace, settings: Settings) -> int:
    name: str | None = args.name
    listing = name is None or args.runs
    kind = "list_backfills" if listing else "run_backfill"

    ended = False

    async def run() -> Envelope:
        nonlocal ended
        unused = unused_backfill_flags(args)
        if unused is not None:
            raise unused
        if args.wait is not None and args.wait < 0:
            # Refused before the write: a pass started with its wait dropped is not what was asked.
            raise InvalidArgumentError(
                "wait_seconds", args.wait, "a number of seconds ≥ 0", nearest=0
            )
        async with open_jobs(settings) as jobs:
            if name is None or args.runs:
                scope = scope_of(jobs, settings, "backfill")
                return await operations.list_backfills(
                    scope,
                    pending_only=args.pending,
                    name=name,
                    runs_limit=args.runs_limit,
                    runs_cursor=args.runs_cursor,
                )
            bar = ProgressBar(f"backfill {name}", enabled=False if args.json else None)
            scope = scope_of(jobs, settings, "backfill", bar)
            try:
                answer = await write_or_plan(scope, name, args, bar)
            finally:
                bar.close()
            ended = isinstance(answer, RunBackfillResult) and answer.settled is False
            return answer

    code = await guarded(kind, args.json, run, settings)
    # A wait that ended before the pass settled is no success a script may go on from.
    return WAIT_ENDED_EXIT if code == 0 and ended else code


async def write_or_plan(
    scope: Scope, name: str, args: argparse.Namespace, bar: ProgressBar
) -> Envelope:
    if not args.write:
        return await operations.run_backfill(scope, name, force=args.force)
    # A write that waits follows a live pass of the name in place of a new one (`deduped`).
    joins = args.wait is not None and args.wait > 0
    result = await operations.run_backfill(scope, name, write=True, force=args.force, joins=joins)
    wait = args.wait
    if wait is None:
        # At a terminal, follow the pass with a bar — when a worker serves its queue (else the
        # answer's NO_LIVE_WORKERS notice says how to start one).
        wait = FOLLOW_SECONDS if bar.enabled and not result.notices else 0.0
    if wait <= 0 or result.start is None:
        return result
    # A pass that fails answers its own error (`exit_status`); one not settled when the wait
    # ends says why it may not move, and the command exits WAIT_ENDED_EXIT (`backfill_command`).
    return await follow_write(scope, result, wait)


# --- db -----------------------------------------------------------------------------------------


async def db_command(args: argparse.Namespace, settings: Settings) -> int:
    if args.action == "prune":
        return await prune_command(args, settings)
    if args.action == "nats-report":
        return await nats_report_command(args, settings)
    if args.action == "report":
        return await report_command(args, settings)

    async def run() -> Envelope:
        jobs = written_by_face(await connect(settings.url, migrate=False))
        try:
            result = MigrateResult(ok=True, driver=jobs.driver.kind, database=redact(settings.url))
            if not isinstance(jobs.driver, VersionedSchema):
                # A store of no numbered migrations (a NATS bucket): whether this run made it.
                driver = jobs.driver
                absent = await driver.store_absent() if isinstance(driver, InstalledStore) else None
                await jobs.migrate()
                made = None if absent is None else f"{absent.what} {absent.name}"
                return result.model_copy(update={"installed": made})
            # Not connect()'s own migration: that would leave nothing for this one to name.
            migrated = await jobs.driver.migrate_versions()
            return result.model_copy(
                update={"applied": migrated.applied, "schema_line": migrated.schema}
            )
        finally:
            await jobs.close()

    return await guarded("db_migrate", args.json, run, settings)


async def prune_command(args: argparse.Namespace, settings: Settings) -> int:
    """`db prune`: the dry run's counts, or every expired row pruned in batches."""

    # A write's Ctrl-C (or SIGTERM) ends it after the batch in hand (`_stop_on_signal`).
    stop = anyio.Event()

    async def run() -> Envelope:
        _refuse_negative(args.older_than, settings)
        # The dry run too: it would count what the write refuses, and print that write's line.
        _refuse_bare_seconds(args.older_than, settings)
        # A prune of a year's history runs minutes: its batches are drawn at a terminal.
        bar = ProgressBar("prune", enabled=False if args.json or args.dry_run else None)
        async with open_jobs(settings) as jobs:
            scope = scope_of(jobs, settings, "db prune", bar)
            try:
                return await _stoppable(
                    not args.dry_run,
                    stop,
                    lambda: operations.prune_history(
                        scope,
                        write=not args.dry_run,
                        older_than=args.older_than,
                        states=args.state,
                        stop=stop,
                    ),
                )
            finally:
                bar.close()

    envelope, fixes = await answer_of("prune_history", run, settings)
    typed_line = typed_words()
    interrupted = stop.is_set() and envelope.get("ok") and envelope.get("more")
    if interrupted:
        # As `jobs retry-all` says: how far it got (the counts) and the line for the rest.
        envelope["interrupted"] = True
        envelope["act_command"] = fixes.command(*fix_words(typed_line or ["db", "prune"]))
    code = emit("prune_history", envelope, args.json, fixes)
    if interrupted:
        if not args.json:
            print(f"interrupted after {envelope.get('batches')} batch(es); for the rest:")
            print(envelope["act_command"])
        return INTERRUPTED_EXIT
    if (
        args.dry_run
        and not args.json
        and typed_line
        and sum((envelope.get("by_state") or {}).values())
    ):
        # A plan at a terminal ends with the line that acts, as `backfill` and `retry-all` do.
        acting = [word for word in typed_line if word != "--dry-run"]
        print(f"to prune them: {fixes.command(*fix_words(acting))}")
    return code


E = TypeVar("E", bound=Envelope)


async def _stoppable(listen: bool, stop: anyio.Event, act: Callable[[], Awaitable[E]]) -> E:
    """`act()`, with the first Ctrl-C or SIGTERM setting `stop` while it runs when `listen`."""
    if not listen:
        return await act()
    failed: Exception | None = None
    async with anyio.create_task_group() as signals:
        await signals.start(_stop_on_signal, stop)
        try:
            result = await act()
        except Exception as exc:  # raised as itself, not in the task group's ExceptionGroup
            failed = exc
        signals.cancel_scope.cancel()
    if failed is not None:
        raise failed
    return result


def _refuse_negative(older_than: str | None, settings: Settings) -> None:
    """`db prune --older-than -5d`: no time is negative, and plainly the time ago was meant
    (5d). The sign is a guess on a destructive command: the fix is the line's dry run with it,
    which shows what would go."""
    magnitude = (older_than or "").strip().removeprefix("-").strip()
    if older_than is None or not older_than.strip().startswith("-") or not magnitude:
        return
    # A bare number is days, as `_refuse_bare_seconds` reads it; past ten years, the bound.
    meant = meant_duration(magnitude + "d" if _NUMBER.fullmatch(magnitude) else magnitude)
    words = typed_words()
    typed = None if words is None else with_value(words, {"--older-than"}, older_than, meant)
    fix = None
    if typed is not None and meant is not None:
        dry = typed if "--dry-run" in typed else [*typed, "--dry-run"]
        fix = refusal_context(settings).command(*fix_words(dry))
    raise InvalidArgumentError(
        "older_than",
        older_than,
        "a duration of 0 or more (90s, 12h, 7d): rows finished that long ago go; no time "
        "ago is negative",
        fix=fix,
    )


_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def _refuse_bare_seconds(older_than: str | None, settings: Settings) -> None:
    """`db prune --older-than 7`: a bare number is seconds, and the prune deletes at once every
    job settled before then. A unit left out of a destructive command is not guessed: refused,
    the fix the dry run of the days it most likely meant, which shows what would go. Its dry run
    is refused alike (exploreY: it counted by seconds, then printed the write it refuses)."""
    try:
        number = float(older_than) if older_than is not None else None
    except ValueError:
        return
    if number is None or not math.isfinite(number) or number < 0:
        return
    words = typed_words()
    meant = meant_duration(f"{older_than.strip()}d") if older_than is not None else None
    typed = None
    if words is not None and meant is not None:
        typed = with_value(words, {"--older-than"}, older_than, meant)
    fix = None
    if typed is not None:
        dry = typed if "--dry-run" in typed else [*typed, "--dry-run"]
        fix = refusal_context(settings).command(*fix_words(dry))
    raise InvalidArgumentError(
        "older_than",
        older_than,
        f"a duration with its unit (90s, 12h, 7d): a bare number is seconds, and {older_than} s "
        f"would delete every job settled before {older_than} seconds ago",
        fix=fix,
    )


async def report_command(args: argparse.Namespace, settings: Settings) -> int:
    """`db report`: the fix of a database that does not answer, is full or refuses. One it
    cannot use fails with the error every command gets there, and its exit status (75 for a
    server away, 1 for a URL it refuses), the report's lines still shown (with `--json`, its
    fields beside `error`; as text, on stdout before the error)."""
    found: list[DbReportResult] = []

    async def run() -> Envelope:
        jobs = await connect(settings.url, migrate=False)
        try:
            found.append(await report_of(jobs.driver, settings.url))
            await refuse_unusable(jobs.driver.kind, settings.url, found[0])
            return found[0]
        finally:
            await jobs.close()

    envelope, fixes = await answer_of("db_report", run, settings)
    if found and not envelope["ok"]:
        shown = success(FixContext.of(settings, face="cli").qualify_all(found[0]))
        if not args.json:
            print_text("db_report", shown)
        envelope = {**shown, **envelope}
    return emit("db_report", envelope, args.json, fixes)


async def nats_report_command(args: argparse.Namespace, settings: Settings) -> int:
    """`db nats-report`: the NATS driver's STORAGE_FULL and contended-key fix."""

    async def run() -> Envelope:
        # Imported here: the nats extra is installed only where the NATS driver is used.
        from engine.drivers.nats.report import report

        return NatsReportResult(ok=True, lines=await report(settings.url, args.key))

    return await guarded("db_nats_report", args.json, run, settings)
