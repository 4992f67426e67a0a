"""The CLI's long-running commands: `serve` (the MCP server) and `worker`, each stopped by a
signal: the first SIGINT/SIGTERM stops gracefully, the second stops now."""

from __future__ import annotations

import argparse
import logging
import signal
from collections.abc import Callable, Coroutine
from functools import partial
from typing import Any

import anyio

from engine import bounds
from engine.declare import JobRegistry
from engine.errors import LEFT_OUT, FlagMend, InvalidArgumentError
from engine.logs import configure_logging
from engine.shell_words import shell_word
from engine.worker import ALL_QUEUES, Worker
from engine.worker_arguments import claimed_queues
from engine.worker_process import tune_for_worker
from mcp_jobs.cap_flags import caps_claimed, limits_of
from mcp_jobs.cli.commands import open_jobs
from mcp_jobs.cli.database_wait import migrated_or_retrying, until_migrated
from mcp_jobs.cli.event_loop import loop_name
from mcp_jobs.cli.mend import print_failure
from mcp_jobs.config import (
    DEFAULT_HOST,
    DEFAULT_PORT,
    OAUTH_SETTINGS,
    TOKEN_ENV,
    Settings,
    bind_host,
    http_settings,
    token_file_exposed,
)
from mcp_jobs.errors import MetricsUnavailableError, TokenFileExposedError, token_file_exposure
from mcp_jobs.incidents import check_incident_dir

logger = logging.getLogger("mcp_jobs.cli")


async def _until_signal(on_first: Callable[[], object], on_second: Callable[[], object]) -> None:
    """First SIGINT/SIGTERM: stop gracefully; the second: stop now. A third is Python's again:
    it ends the process at once."""
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        first = True
        async for _ in signals:
            if first:
                first = False
                on_first()
            else:
                on_second()
                return


def _stopping(worker: Worker) -> None:
    """The first signal: stop gracefully, and say how long that may take and how to cut it."""
    logger.info(
        "worker %s stopping: waiting up to %d s for %d job(s) in flight to finish, then handing "
        "back the rest; a second Ctrl-C (or SIGTERM) hands them back at once",
        worker.id,
        worker.drain_ms // 1000,
        worker.in_flight,
    )
    worker.stop()


async def serve_command(args: argparse.Namespace, settings: Settings) -> int:
    # Imported here: the SDK and uvicorn are not worth loading for the other commands.
    from mcp_jobs.dashboard import mounted_beside
    from mcp_jobs.server import build_server
    from mcp_jobs.server.confirm_settings import confirm_settings, log_confirm_setting
    from mcp_jobs.server.http import require_token, short_token_warning
    from mcp_jobs.server.http_serve import serve_http

    http = args.transport == "http"
    try:
        if not http:
            _no_http_flags(args)
        settings = confirm_settings(settings, args.confirm_writes, args.confirm_ttl_seconds)
        # Checked here, not when a failure writes its traceback (the fix of INTERNAL names it).
        check_incident_dir()
        if http:
            # Checked before the database opens: a refused start touches nothing.
            settings = http_settings(
                settings,
                token_file=args.token_file,
                session_idle_seconds=args.session_idle_seconds,
                max_sessions=args.max_sessions,
                oauth=oauth_flags(args),
                allowed_hosts=args.allowed_host,
            )
            if settings.oauth is None:
                require_token(settings)
            else:  # the issuer's keys, read once: a wrong issuer fails here
                settings = await discover_oauth(settings)
        warnings = [token_file_warning(settings), short_token_warning(settings)] if http else []
        configure_logging(json=args.log_format == "json", level=args.log_level)
        for warning in filter(None, warnings):
            logger.warning("%s", warning)
        log_confirm_setting(settings)
        async with (
            open_jobs(settings, migrate=False, creates=True) as jobs,
            migrated_or_retrying(jobs),
        ):
            server = build_server(settings, jobs, http=http)
            if http:
                await serve_http(server, settings, beside=mounted_beside(settings, jobs))
            else:
                await server.run_stdio_async()
    except Exception as exc:  # shown as code/cause/fix, not a traceback
        return print_failure(exc, settings, "mcp-jobs serve")
    return 0


def token_file_warning(settings: Settings) -> str | None:
    """What to warn of at start when the token file others can read serves on loopback (the
    machine's other users); beyond loopback it is refused, HTTP_TOKEN_FILE_EXPOSED, as a short
    token is there. None for a file only its owner reads, or a token from the environment."""
    from mcp_jobs.server.http import is_loopback

    path = settings.token_source
    if settings.token is None or path == TOKEN_ENV:
        return None
    mode = token_file_exposed(path)
    if mode is None:
        return None
    if not is_loopback(settings.host):
        raise TokenFileExposedError(path, mode, settings.host)
    return f"{token_file_exposure(path, mode)}: chmod 600 {shell_word(path)}"


# Why `serve` over stdio refuses a flag only HTTP reads: taken, it was dropped without a word
# (`serve --port 8000 --token-file tok` with `--transport http` forgotten served stdio).
HTTP_ONLY = "given only with --transport http, the one transport that reads it"
_HTTP_DESTS = ("token_file", "session_idle_seconds", "max_sessions", "allowed_host")


class HttpOnlyFlagError(InvalidArgumentError, FlagMend):
    """INVALID_ARGUMENT for a flag only HTTP reads, given to a stdio server. The CLI mends the
    line by `--transport http` (FlagMend): each such flag typed is then read, where leaving out
    one of them left the next to be refused."""

    def __init__(self, flag: str, value: object) -> None:
        super().__init__(flag, value, HTTP_ONLY)
        self.flag, self.typed, self.nearest, self.set_anyway = "--transport", "stdio", "http", True


def _no_http_flags(args: argparse.Namespace) -> None:
    """HttpOnlyFlagError for the first HTTP-only flag given to a stdio server, before anything
    opens. `--host` and `--port` have defaults: only another value is known to be typed."""
    given = [(dest, getattr(args, dest, None)) for dest in _HTTP_DESTS]
    given += [(f"oauth_{name}", value) for name, value in oauth_flags(args).items()]
    given += [("host", None if args.host == DEFAULT_HOST else args.host)]
    given += [("port", None if args.port == DEFAULT_PORT else args.port)]
    for dest, value in given:
        if value is not None:
            shown = ",".join(value) if isinstance(value, list) else value
            raise HttpOnlyFlagError("--" + dest.replace("_", "-"), shown)


def oauth_flags(args: argparse.Namespace) -> dict[str, str | None]:
    return {name: getattr(args, f"oauth_{name}", None) for name in OAUTH_SETTINGS}


async def discover_oauth(settings: Settings) -> Settings:
    from mcp_jobs.server.oauth import discover  # OAUTH_UNAVAILABLE without the `oauth` extra

    return await discover(settings)


# Why `worker --tenant T` is refused: claims are by queue, never by tenant.
WORKER_TENANT = (
    "left out: a worker serves every tenant's jobs (it claims by queue); to keep a tenant's "
    "jobs apart, give them queues of their own and run a worker with --queues"
)


async def worker_command(args: argparse.Namespace, settings: Settings) -> int:
    try:
        if args.tenant is not None:
            # Taken and ignored, the worker ran every tenant's jobs for an operator who asked for
            # one (an empty one too: it is no tenant either).
            raise InvalidArgumentError("--tenant", args.tenant, WORKER_TENANT, nearest=LEFT_OUT)
        configure_logging(json=args.log_format == "json", level=args.log_level)
        if args.metrics_port is not None:
            bounds.port("metrics_port", args.metrics_port)
        metrics_host = _metrics_host(args)
        limits = limits_of(args)
        serve_metrics = _metrics() if args.metrics_port is not None else None
        async with open_jobs(settings, migrate=False, creates=True) as jobs:
            # A worker started before its database answers waits for it, as a running worker
            # rides out an outage (compose and systemd start them side by side).
            await until_migrated(jobs, say=True)
            queues = ALL_QUEUES if args.queues == [ALL_QUEUES] else args.queues
            _refuse_joined_queues(queues, jobs.registry)
            # Worker(...) applies the same rule; refused here first, as the flag typed.
            caps_claimed(args, claimed_queues(queues, jobs.registry))
            worker = Worker(
                jobs,
                concurrency=args.concurrency,
                prefetch=args.prefetch,
                queues=queues,
                limits=limits,
                apps=settings.apps or None,  # published with the descriptors, as typed
            )
            async with anyio.create_task_group() as tg:
                tg.start_soon(_until_signal, partial(_stopping, worker), worker.hand_back_now)
                if serve_metrics is not None:
                    await tg.start(serve_metrics, worker, args.metrics_port, metrics_host)
                logger.info(
                    "worker %s running %s from %s on %s",
                    worker.id,
                    ", ".join(jobs.registry.names()) or "no jobs",
                    _queues_said(worker.queues),
                    loop_name(),
                )
                # A worker that claims nothing says so itself as it starts (no app imported).
                tune_for_worker()  # this process is the worker's alone
                await worker.run()
                tg.cancel_scope.cancel()
    except Exception as exc:  # shown as code/cause/fix, not a traceback
        return print_failure(exc, settings, "mcp-jobs worker")
    return 0


# Why `--queues a,b` is refused when no job here is in a queue so named: taken, the worker
# served one queue named "a,b", which its start line printed as if it were two.
JOINED_QUEUES = "queue names apart, one word each: --queues a b (a comma is part of one name)"


def _refuse_joined_queues(queues: list[str] | str | None, registry: JobRegistry) -> None:
    """INVALID_ARGUMENT for a queue holding a comma that no registered job is in; the CLI
    mends the line with the names apart (`nearest`)."""
    if not isinstance(queues, list):
        return
    declared = {registry.require(name).queue for name in registry.names()}
    for queue in queues:
        if "," in queue and queue not in declared:
            apart = [q for q in queue.split(",") if q]
            raise InvalidArgumentError("--queues", queue, JOINED_QUEUES, nearest=apart)


def _queues_said(queues: list[str] | None) -> str:
    return "every queue" if queues is None else ", ".join(queues) or "no queue"


# Why `worker --metrics-host H` without `--metrics-port` is refused: taken, it served nothing.
METRICS_HOST_ALONE = "left out: metrics are off without --metrics-port, so no address is bound"


def _metrics_host(args: argparse.Namespace) -> str:
    """The metrics endpoint's bind address, checked before the database opens."""
    if args.metrics_host is None:
        return DEFAULT_HOST
    if args.metrics_port is None:
        raise InvalidArgumentError(
            "--metrics-host", args.metrics_host, METRICS_HOST_ALONE, nearest=LEFT_OUT
        )
    return bind_host(args.metrics_host, "--metrics-host", "mcp-jobs worker")


def _metrics() -> Callable[..., Coroutine[Any, Any, None]]:
    try:
        from engine.metrics import serve_metrics
    except ImportError as exc:
        raise MetricsUnavailableError() from exc
    return serve_metrics
