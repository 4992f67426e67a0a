"""The CLI's commands. The `jobs` and `backfill` commands run the same operations as the MCP tools
(through a `Scope` with actor `cli`), so `--json` prints exactly the envelope a tool returns.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import anyio

from engine.client import Jobs, connect
from engine.logs import configure_logging
from engine.observe import WorkerEvent
from engine.worker import Worker
from mcp_jobs import tools_read, tools_write
from mcp_jobs.config import Scope, Settings, load_apps
from mcp_jobs.envelope import error_payload, failure, success
from mcp_jobs.errors import MetricsUnavailableError, TokenRequiredError
from mcp_jobs.event_loop import loop_name
from mcp_jobs.models import Envelope, QueueStatsResult
from mcp_jobs.render import ProgressBar, print_error, print_json, print_text

logger = logging.getLogger("mcp_jobs.cli")

# How long `backfill NAME --write` follows the pass at a terminal, when a worker is live.
FOLLOW_SECONDS = 600.0


class MigrateResult(Envelope):
    driver: str | None = None
    database: str | None = None


class DrainResult(Envelope):
    claimed: int | None = None
    outcomes: dict[str, int] | None = None
    queues: QueueStatsResult | None = None


def redact(url: str) -> str:
    """The URL without its password (in the user part or a `password=` parameter), for output
    and logs. Works on the raw text, so a percent-encoded password is masked too."""
    parts = urlsplit(url)
    userinfo, at, host = parts.netloc.rpartition("@")
    netloc = f"{userinfo.partition(':')[0]}:***@{host}" if at and ":" in userinfo else parts.netloc
    query = "&".join(
        f"{key}=***" if key.lower() == "password" else f"{key}{eq}{value}"
        for key, eq, value in (pair.partition("=") for pair in parts.query.split("&"))
    )
    if (netloc, query) == (parts.netloc, parts.query):
        return url  # nothing to hide (and urlunsplit would rewrite `sqlite:///…`)
    return urlunsplit(parts._replace(netloc=netloc, query=query))


@asynccontextmanager
async def open_jobs(settings: Settings, *, migrate: bool = True) -> AsyncIterator[Jobs]:
    load_apps(settings.apps)
    jobs = await connect(settings.url, migrate=migrate)
    try:
        yield jobs
    finally:
        await jobs.close()


def scope_of(jobs: Jobs, settings: Settings, command: str, bar: ProgressBar | None = None) -> Scope:
    if bar is None:
        return Scope(jobs=jobs, settings=settings, tool=command, actor="cli")
    return Scope(jobs=jobs, settings=settings, tool=command, actor="cli", progress=bar.update)


# --- output -------------------------------------------------------------------------------------


def emit(kind: str, envelope: dict[str, Any], as_json: bool) -> int:
    if as_json:
        print_json(envelope)
    elif envelope["ok"]:
        print_text(kind, envelope)
    else:
        print_error(envelope["error"])
    return 0 if envelope["ok"] else 1


async def guarded(kind: str, as_json: bool, run: Callable[[], Awaitable[Envelope]]) -> int:
    """Run a command; any failure prints as the same envelope (or code/cause/fix) and exits 1."""
    try:
        envelope = success(await run())
    except Exception as exc:  # every failure is shown as an envelope; tracebacks go to the log
        envelope = failure(error_payload(exc, where=f"mcp-jobs {kind}"))
    return emit(kind, envelope, as_json)


# --- jobs ---------------------------------------------------------------------------------------


async def jobs_command(args: argparse.Namespace, settings: Settings) -> int:
    action: str = args.action
    kind = {
        "ls": "list_jobs",
        "show": "inspect_job",
        "retry": "retry_job",
        "cancel": "cancel_job",
        "describe": "describe_jobs",
        "stats": "queue_stats",
        "diagnose": "diagnose_queue",
        "drain": "drain",
    }[action]

    async def run() -> Envelope:
        async with open_jobs(settings) as jobs:
            scope = scope_of(jobs, settings, f"jobs {action}")
            if action == "ls":
                return await tools_read.list_jobs(
                    scope,
                    state=args.state or None,
                    name=args.name,
                    queue=args.queue,
                    tenant_id=args.tenant_filter,
                    limit=args.limit,
                    cursor=args.cursor,
                )
            if action == "show":
                return await tools_read.inspect_job(scope, args.job_id)
            if action == "retry":
                return await tools_write.retry_job(scope, args.job_id, args.include_cancelled)
            if action == "cancel":
                return await tools_write.cancel_job(scope, args.job_id)
            if action == "describe":
                return await tools_read.describe_jobs(scope, args.name)
            if action == "stats":
                return await tools_read.queue_stats(scope, args.queues)
            if action == "diagnose":
                return await tools_read.diagnose_queue(scope, args.queue)
            return await drain(scope, args.queues, args.concurrency, as_json=args.json)

    return await guarded(kind, args.json, run)


async def drain(
    scope: Scope, queues: list[str] | None, concurrency: int, *, as_json: bool
) -> DrainResult:
    """Run every job that is due now in this process, then stop: a one-shot worker."""
    jobs = scope.jobs
    before = await jobs.stats(queues)
    total = sum(q.ready + q.expired_leases + q.due_suspended for q in before)
    outcomes: dict[str, int] = {}
    bar = ProgressBar("drain", enabled=None if not as_json else False)

    worker = Worker(jobs, concurrency=concurrency, queues=queues)
    settled = 0

    def count(event: WorkerEvent) -> None:
        nonlocal settled
        if event.kind == "claimed":
            return
        outcomes[event.kind] = outcomes.get(event.kind, 0) + 1
        settled += 1

    worker.add_listener(count)
    async with anyio.create_task_group() as tg:

        async def draw() -> None:
            while True:
                await bar.update(settled, max(total, settled), f"{settled} settled")
                await anyio.sleep(0.2)

        tg.start_soon(draw)
        claimed = await worker.run_until_idle()
        tg.cancel_scope.cancel()
    await bar.update(settled, max(total, settled), "done")
    bar.close()
    return DrainResult(
        ok=True,
        claimed=claimed,
        outcomes=outcomes,
        queues=await tools_read.queue_stats(scope, queues),
    )


# --- backfill -----------------------------------------------------------------------------------


async def backfill_command(args: argparse.Namespace, settings: Settings) -> int:
    name: str | None = args.name
    kind = "list_backfills" if name is None else "run_backfill"

    async def run() -> Envelope:
        async with open_jobs(settings) as jobs:
            if name is None:
                scope = scope_of(jobs, settings, "backfill")
                return await tools_read.list_backfills(scope, pending_only=args.pending)
            bar = ProgressBar(f"backfill {name}", enabled=False if args.json else None)
            scope = scope_of(jobs, settings, "backfill", bar)
            try:
                return await write_or_plan(scope, name, args, bar)
            finally:
                bar.close()

    return await guarded(kind, args.json, run)


async def write_or_plan(
    scope: Scope, name: str, args: argparse.Namespace, bar: ProgressBar
) -> Envelope:
    if not args.write:
        return await tools_write.run_backfill(scope, name, force=args.force)
    result = await tools_write.run_backfill(scope, name, write=True, force=args.force)
    wait = args.wait
    if wait is None:
        # At a terminal, follow the pass with a bar — when some worker can actually run it.
        live = await scope.jobs.driver.live_workers(scope.jobs.clock.now_ms() - 30_000)
        wait = FOLLOW_SECONDS if bar.enabled and live else 0.0
        if bar.enabled and not live:
            print(
                "no live worker: the pass runs once one starts (mcp-jobs worker --app ...)",
                file=sys.stderr,
            )
    if wait <= 0 or result.start is None:
        return result
    start = result.start
    run, settled = await tools_write.follow_backfill(
        scope, start.name, start.run_id, start.job_id, wait
    )
    return result.model_copy(update={"run": run, "settled": settled})


# --- db -----------------------------------------------------------------------------------------


async def db_command(args: argparse.Namespace, settings: Settings) -> int:
    async def run() -> Envelope:
        jobs = await connect(settings.url, migrate=False)
        try:
            await jobs.migrate()
            return MigrateResult(ok=True, driver=jobs.driver.kind, database=redact(settings.url))
        finally:
            await jobs.close()

    return await guarded("db_migrate", args.json, run)


# --- long-running: serve, worker ----------------------------------------------------------------


async def _until_signal(on_first: Callable[[], None], cancel: anyio.CancelScope) -> None:
    """First SIGINT/SIGTERM: stop gracefully; the second: stop now."""
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        first = True
        async for _ in signals:
            if first:
                first = False
                on_first()
            else:
                cancel.cancel()
                return


async def serve_command(args: argparse.Namespace, settings: Settings) -> int:
    from mcp_jobs.app import build_server

    http = args.transport == "http"
    try:
        if http and not settings.token:
            raise TokenRequiredError()
        configure_logging(json=args.log_format == "json", level=args.log_level)
        async with open_jobs(settings) as jobs:
            server = build_server(settings, jobs, http=http)
            if http:
                logger.info("serving MCP at http://%s:%d/mcp", settings.host, settings.port)
                await server.run_streamable_http_async(
                    host=settings.host,
                    port=settings.port,
                    max_request_body_size=settings.limits.max_request_bytes,
                )
            else:
                await server.run_stdio_async()
    except Exception as exc:  # shown as code/cause/fix, not a traceback
        print_error(failure(error_payload(exc, where="mcp-jobs serve"))["error"])
        return 1
    return 0


async def worker_command(args: argparse.Namespace, settings: Settings) -> int:
    try:
        configure_logging(json=args.log_format == "json", level=args.log_level)
        serve_metrics = _metrics() if args.metrics_port is not None else None
        async with open_jobs(settings) as jobs:
            worker = Worker(
                jobs, concurrency=args.concurrency, prefetch=args.prefetch, queues=args.queues
            )
            async with anyio.create_task_group() as tg:
                tg.start_soon(_until_signal, worker.stop, tg.cancel_scope)
                if serve_metrics is not None:
                    await tg.start(serve_metrics, worker, args.metrics_port)
                logger.info(
                    "worker %s running %s on %s",
                    worker.id,
                    ", ".join(jobs.registry.names()) or "no jobs",
                    loop_name(),
                )
                await worker.run()
                tg.cancel_scope.cancel()
    except Exception as exc:  # shown as code/cause/fix, not a traceback
        print_error(failure(error_payload(exc, where="mcp-jobs worker"))["error"])
        return 1
    return 0


def _metrics() -> Callable[..., Coroutine[Any, Any, None]]:
    try:
        from engine.metrics import serve_metrics
    except ImportError as exc:
        raise MetricsUnavailableError() from exc
    return serve_metrics
