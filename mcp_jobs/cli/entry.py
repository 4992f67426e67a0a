"""`mcp-jobs`: serve the MCP server, run a worker, the demo, and operate jobs and backfills.

Every command takes `--database-url` (else `MCP_JOBS_DATABASE_URL`, else the SQLite file
`./.mcp-jobs/jobs.db`) and `--app MODULE` (else `MCP_JOBS_APP`). A failure prints its code, cause
and fix and exits 1, or 75 when it is retryable (exit_status.py; 2 for a command line the parser
refuses); with `--json` it prints the same envelope the MCP tools return.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

import anyio

from engine.backfill.gate import ENVIRONMENT_ENV, resolve_environment
from engine.driver_errors import DatabaseUrlInvalidError
from engine.drivers.urls import DATABASE_URL_ENV, given_url
from engine.errors import LEFT_OUT, InvalidArgumentError, JobsError
from engine.fix_lines import END_OF_OPTIONS
from mcp_jobs.app_modules import on_path_here
from mcp_jobs.cli import commands, dashboard, events, pauses, rate_limits, serve
from mcp_jobs.cli.durations import joined
from mcp_jobs.cli.event_loop import backend_options
from mcp_jobs.cli.exit_status import BROKEN_PIPE_EXIT, INTERRUPTED_EXIT, USAGE_EXIT, exit_status
from mcp_jobs.cli.mend import (
    choice_mended,
    fix_words,
    help_line,
    mended,
    print_failure,
    refusal_context,
    typed,
    with_value,
)
from mcp_jobs.cli.parser import UsageError, build_parser, groups_with
from mcp_jobs.cli.plan_only import command_of, planned
from mcp_jobs.cli.render import print_error, print_json
from mcp_jobs.config import (
    APP_ENV,
    Settings,
    misspelt_setting,
    settings_from_env,
    split_apps,
    tenant_variable,
)
from mcp_jobs.errors import AppImportError, CommandLineInvalidError
from mcp_jobs.fix_context import PROGRAM, FixContext
from mcp_jobs.operations.envelope import TEXT_LIMIT, error_payload, failure

EMPTY_URL = (
    "--database-url is empty; a fix line names a URL that holds a secret as "
    f'"${DATABASE_URL_ENV}", so export {DATABASE_URL_ENV} with that URL where you run it, or '
    "leave --database-url out for the default database"
)
EMPTY_TENANT = "a tenant's name (left out, the command acts for every tenant)"
# `events send` without --tenant sends a tenantless event; its fix is that command.
EMPTY_TENANT_EVENT = (
    "a tenant's name (left out, the event is sent with no tenant: only the waits of jobs "
    "with no tenant see it)"
)
EMPTY_APP = "a module declaring jobs, or several by commas (left out, no app module is loaded)"
# The walkthrough `mcp-jobs demo` runs: the example app's own module, installed beside this
# package and loaded by name like any `--app`, so this package never imports the example.
DEMO_MODULE = "examples.demo"


def run_demo() -> int:
    try:
        demo = importlib.import_module(DEMO_MODULE)
    except ImportError as exc:
        refused = AppImportError(DEMO_MODULE, f"{type(exc).__name__}: {exc}")
        fixes = FixContext.of(settings_from_env(), face="cli")
        envelope = failure(error_payload(refused, where="mcp-jobs demo", context=fixes))
        print_error(envelope["error"])
        return exit_status(envelope)
    try:
        code: int = demo.main()
    except Exception as exc:  # a database the demo cannot use: code, cause and fix, as any command
        return print_failure(exc, settings_from_env(), "mcp-jobs demo")
    return code


def refuse_usage(refused: UsageError, argv: Sequence[str]) -> int:
    """A command line the parser refused, as INVALID_ARGUMENT: the envelope under --json, else
    the usage line and code, cause and fix (the line mended where a choice plainly stands for
    one the command takes, else the command's --help)."""
    error = CommandLineInvalidError(refused.prog, refused.message, fix=_usage_fix(refused, argv))
    envelope = failure(error_payload(error, where=refused.prog))
    if refused.takes_json and "--json" in argv:
        print_json(envelope)
    else:
        sys.stderr.write(refused.usage)
        print_error(envelope["error"])
    return USAGE_EXIT


def _usage_fix(refused: UsageError, argv: Sequence[str]) -> str:
    """The command line mended, written as every fix line is (the database URL from the
    settings, a password left out), when the mended line parses; else the command's --help. A
    guessed line (a slip of the keys, an action moved under its command, `--yes` beside
    `--dry-run`) comes back as the line that writes nothing (`plan_only`)."""
    words, guessed = _mended_line(refused, argv)
    if words is not None and guessed:
        plan = planned(words)
        named = refused.choice is None or not refused.choice.flags
        if plan is None and named:  # a command guessed that writes with no plan: its help
            return help_line(" ".join([PROGRAM, *command_of(words)]))
        # A flag's value guessed (`worker --log-format jsn`) leaves the command as typed.
        words = words if plan is None else plan
    if words is None:
        return help_line(refused.prog)
    try:
        args = build_parser().parse_args(words)
        fixes = refusal_context(_settings(args))
    except (UsageError, JobsError):
        return help_line(refused.prog)
    fix = fixes.command(*fix_words(words))
    # Longer than an error's text may be, the line is cut there (a 10 KB value typed): no fix.
    return fix if len(fix) <= TEXT_LIMIT else help_line(refused.prog)


# The options every command takes, and whether each takes a value: given before the command
# (`mcp-jobs --app shop worker`, as `git -C` is), argparse read the value as the command.
_COMMON_OPTIONS = {"--database-url": True, "--app": True, "--tenant": True, "--json": False}


def _options_after_the_command(argv: Sequence[str]) -> list[str] | None:
    """`argv` with the common options typed ahead of the command moved to the line's end (a
    command's own parser reads them after its action), or None when it starts otherwise."""
    ahead: list[str] = []
    at = 0
    while at < len(argv) and argv[at].split("=", 1)[0] in _COMMON_OPTIONS:
        flag = argv[at].split("=", 1)[0]
        takes = _COMMON_OPTIONS[flag] and "=" not in argv[at]
        ahead += argv[at : at + 1 + takes]
        at += 1 + takes
    if not ahead or at >= len(argv) or len(ahead) > at:
        return None
    rest = list(argv[at:])
    end = rest.index(END_OF_OPTIONS) if END_OF_OPTIONS in rest else len(rest)
    return [*rest[:end], *ahead, *rest[end:]]


def _mended_line(refused: UsageError, argv: Sequence[str]) -> tuple[list[str] | None, bool]:
    """The line the refused one stands for, and whether it is a guess; None when there is none."""
    moved = _options_after_the_command(argv)
    if moved is not None:
        return moved, False
    if refused.conflicting:
        return list(argv), True
    # A duration in words (`"7 days"`, or `7 days` as two words) is no guess: the same time.
    if refused.in_words is not None:
        spelt_value = refused.in_words
        return with_value(argv, set(spelt_value.flags), spelt_value.typed, spelt_value.near), False
    if refused.durations:
        together = joined(argv, refused.durations)
        if together is not None:
            return together, False
    choice = refused.choice
    if choice is None:
        return None, False
    found = choice_mended(choice, argv)
    if found is not None:
        return found
    return (_under_its_command(choice.value, argv) if not choice.flags else None), True


def _under_its_command(action: str, argv: Sequence[str]) -> list[str] | None:
    """`argv` with the command before `action` replaced by the one command that has it."""
    (command, *more) = groups_with(action) or [""]
    at = list(argv).index(action) if action in argv else 0
    if not command or more or at < 1:
        return None
    return [*argv[: at - 1], command, *argv[at:]]


def _empty_setting(args: argparse.Namespace) -> InvalidArgumentError | None:
    """An empty `--tenant` or `--app` (or `MCP_JOBS_APP`, or an `MCP_JOBS_ENV` that is no
    environment name), most often `--tenant "$TENANT"` with
    the variable unset: read as none, the pin asked for would be dropped (the command, or
    server, acting on every tenant's jobs), or no app loaded (a worker running none of its
    jobs)."""
    fix = help_line(args.prog)
    if args.command == "events" and args.tenant == "":
        # What the line without it does is plain here: the CLI writes that command (mend.py).
        return InvalidArgumentError("--tenant", "", EMPTY_TENANT_EVENT, nearest=LEFT_OUT)
    # A worker refuses any --tenant (serve.worker_command).
    if getattr(args, "tenant", None) == "" and args.command != "worker":
        return InvalidArgumentError("--tenant", "", EMPTY_TENANT, fix=fix)
    for app in args.app:
        if not split_apps([app]):
            return InvalidArgumentError("--app", app, EMPTY_APP, fix=fix)
    from_env = os.environ.get(APP_ENV)
    if not args.app and from_env is not None and not split_apps([from_env]):
        # Fixed where it came from, as every setting set but empty is (MCP_JOBS_ENV's, the
        # URL's): the command's --help changed nothing, the variable being read again.
        return InvalidArgumentError(APP_ENV, from_env, EMPTY_APP, fix=f"unset {APP_ENV}")
    try:
        resolve_environment()  # MCP_JOBS_ENV: empty or no environment name
    except InvalidArgumentError as exc:
        return exc
    # A slip in a variable's name (MCP_JOBS_DATABSE_URL) left its setting at its default: for
    # the URL, a new empty SQLite file here. A --database-url given makes that one moot.
    environ = dict(os.environ)
    if args.database_url:
        environ[DATABASE_URL_ENV] = args.database_url
    return tenant_variable(environ) or misspelt_setting(environ)


def _settings(args: argparse.Namespace) -> Settings:
    return settings_from_env(
        database_url=args.database_url,
        apps=args.app,
        read_only=getattr(args, "read_only", False),
        tenant=args.tenant,
        host=getattr(args, "host", None),
        port=getattr(args, "port", None),
    )


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _run(argv)
    except BrokenPipeError:
        # The interpreter flushes stdout again at exit; into the closed pipe that is one more
        # traceback. What is left unwritten goes nowhere.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return BROKEN_PIPE_EXIT


def _run(argv: Sequence[str] | None) -> int:
    given = sys.argv[1:] if argv is None else list(argv)
    if argv is None:  # this process is the command: its --app modules are found from here
        on_path_here()
    try:
        args = build_parser().parse_args(given)
    except UsageError as usage:
        return refuse_usage(usage, given)
    if args.command == "demo":
        return run_demo()
    if args.database_url == "":
        # Most often a fix line's "$MCP_JOBS_DATABASE_URL" (how it names a URL holding a
        # secret) run where that variable is not set: not the default database instead.
        refused = DatabaseUrlInvalidError("", reason=EMPTY_URL)
        envelope = failure(error_payload(refused, where=f"mcp-jobs {args.command}"))
        return commands.emit(args.command, envelope, getattr(args, "json", False))
    try:  # MCP_JOBS_DATABASE_URL set but empty, with no flag: not the default database either
        given_url(args.database_url, os.environ.get(DATABASE_URL_ENV))
    except DatabaseUrlInvalidError as refused:
        envelope = failure(error_payload(refused, where=f"mcp-jobs {args.command}"))
        return commands.emit(args.command, envelope, getattr(args, "json", False))
    empty = _empty_setting(args)
    if empty is not None:
        said: BaseException = empty
        fixes = None
        # MCP_JOBS_ENV: its fix may be an environment the app declares, imported here.
        if empty.nearest is LEFT_OUT or empty.argument == ENVIRONMENT_ENV:
            fixes = refusal_context(_settings(args))
            with typed(given, args.prog):
                said = mended(empty, fixes)
        payload = error_payload(said, where=f"mcp-jobs {args.command}", context=fixes)
        return commands.emit(args.command, failure(payload), getattr(args, "json", False))
    settings = _settings(args)
    command = {
        "serve": serve.serve_command,
        "worker": serve.worker_command,
        "jobs": commands.jobs_command,
        "backfill": commands.backfill_command,
        "db": commands.db_command,
        "queues": pauses.queues_command,
        "limits": rate_limits.limits_command,
        "events": events.events_command,
        "dashboard": dashboard.dashboard_command,
    }[args.command]
    options: dict[str, bool] = {}
    if args.command == "worker":
        # The long-running worker takes uvloop when it is installed (see event_loop.py).
        try:
            options = backend_options()
        except JobsError as exc:
            fixes = refusal_context(settings)
            envelope = failure(error_payload(exc, where="mcp-jobs worker", context=fixes))
            print_error(envelope["error"])
            return exit_status(envelope)
    try:
        with typed(given, args.prog):
            code: int = anyio.run(command, args, settings, backend_options=options)
    except KeyboardInterrupt:
        return INTERRUPTED_EXIT
    return code
