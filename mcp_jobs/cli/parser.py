"""The `mcp-jobs` command line: its commands, their flags and the examples in `--help`."""

from __future__ import annotations

import argparse
import inspect
import math
import re
import sys
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, NoReturn, get_args

from engine.meant import meant_as, meant_note
from engine.retention import meant_duration
from engine.worker import Worker
from mcp_jobs.cap_flags import add_cap_flags
from mcp_jobs.cli.command_grammar import add_dashboard, add_events, add_limits, add_queues
from mcp_jobs.config import (
    DEFAULT_HOST,
    DEFAULT_MAX_SESSIONS,
    DEFAULT_PORT,
    DEFAULT_SESSION_IDLE_SECONDS,
    SHOWN,
    add_allowed_host,
    seconds_in,
)
from schemas.jobs import OnConflict
from schemas.states import JOB_STATES, SETTLED_STATES, CancelState, RetryState

EPILOG = """\
examples:
  mcp-jobs demo
  mcp-jobs serve --app examples.shop                  (stdio, for Claude Desktop / Code)
  mcp-jobs serve --app examples.shop --transport http --token-file .mcp-jobs/token
  mcp-jobs worker --app examples.shop --concurrency 8
  mcp-jobs jobs ls --state dead --json
  mcp-jobs jobs retry JOB_ID
  mcp-jobs backfill --pending
  mcp-jobs backfill NAME --write
  mcp-jobs backfill NAME --runs
  mcp-jobs db migrate
  mcp-jobs db prune --dry-run --json
"""


def _common(json_flag: bool = True, tenant: bool = True) -> argparse.ArgumentParser:
    """The options every command takes; without `tenant` (a worker, which serves every
    tenant's jobs) `--tenant` is still read, unlisted, so that it is refused, not ignored."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--database-url",
        help="memory://, sqlite:///path.db, postgresql://…, redis://… or nats://… (default: "
        "$MCP_JOBS_DATABASE_URL, else sqlite:///.mcp-jobs/jobs.db)",
    )
    common.add_argument(
        "--app",
        action="append",
        default=[],
        metavar="MODULE",
        help="module declaring jobs, tasks and backfills (repeatable; default $MCP_JOBS_APP)",
    )
    common.add_argument(
        "--tenant",
        help="act for this tenant only: another tenant's job is not found"
        if tenant
        else argparse.SUPPRESS,
    )
    if json_flag:
        common.add_argument("--json", action="store_true", help="print the envelope as JSON")
    return common


def _positive(kind: type[float] | type[int]) -> Callable[[str], float]:
    """An argparse type: a finite number above zero, or a usage error that says so."""

    def parse(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            value = 0
        if not (math.isfinite(value) and value > 0):
            raise argparse.ArgumentTypeError(f"{text!r} is not a positive {kind.__name__}")
        return value

    return parse


def _seconds(kind: type[float] | type[int], *, positive: bool = False) -> Callable[[str], float]:
    """An argparse type for a `*-seconds` flag: a number of seconds or a duration ("7d"), read
    as MCP reads a `*_seconds` argument (`seconds_in`); whole seconds for an `int` flag, above
    zero when `positive`. A range beyond that is the command's own check, which mends the line."""

    def parse(text: str) -> float:
        value = seconds_in(text.strip())
        whole = kind is float or (value is not None and value.is_integer())
        if value is None or not (math.isfinite(value) and whole) or (positive and value <= 0):
            what = (
                "a positive number" if positive else "a whole number" if kind is int else "a number"
            )
            message = f"{text!r} is not {what} of seconds, or a duration such as 90s, 30m, 12h, 7d"
            near = meant_duration(text)
            if near is not None and near != text and _read(parse, near):
                raise DurationInWords(f"{message} (meant {near}?)", text, near)
            raise argparse.ArgumentTypeError(message)
        return kind(value)

    _DURATION_TYPES.add(parse)
    return parse


class DurationInWords(argparse.ArgumentTypeError):
    """A duration flag's value written in words ("7 days"): `near` is the text it reads ("7d"),
    so the refusal's fix is the line with it."""

    def __init__(self, message: str, typed: str, near: str) -> None:
        super().__init__(message)
        self.typed, self.near = typed, near


def _read(parse: Callable[[str], float], text: str) -> bool:
    try:
        parse(text)
    except argparse.ArgumentTypeError:
        return False
    return True


# The argparse types of the `*-seconds` flags: a refusal names these flags as durations.
_DURATION_TYPES: set[Callable[[str], float]] = set()


# `Worker(concurrency=...)`'s own default: the command runs the worker the API does.
_WORKER_CONCURRENCY: int = inspect.signature(Worker).parameters["concurrency"].default


def _logging(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--log-format", choices=("text", "json"), default="text")
    parser.add_argument("--log-level", default="INFO")


@dataclass(frozen=True)
class RefusedChoice:
    """A value typed where a command takes one of named choices: the flags that carry it (none
    for a command's name), the value as typed, the choices, and whether the flag repeats."""

    flags: tuple[str, ...]
    value: str
    choices: tuple[str, ...]
    repeats: bool


class UsageError(Exception):
    """A command line the parser refused: `prog` is the (sub)command, `usage` its usage line,
    `takes_json` whether that command takes --json (`serve`'s stdout is the protocol's),
    `choice` the value refused as none of a flag's choices, when that was the refusal, and
    `conflicting` whether it was two flags that exclude each other (`--dry-run` and `--yes`)."""

    def __init__(
        self,
        prog: str,
        message: str,
        usage: str,
        takes_json: bool = False,
        choice: RefusedChoice | None = None,
        conflicting: bool = False,
        *,
        in_words: SpeltValue | None = None,
        durations: tuple[str, ...] = (),
    ) -> None:
        """`in_words`: a duration flag's value refused as written in words, with the text it
        reads; `durations`: the command's duration flags, for a unit typed as a word of its own
        (`--since 7 days`), when the refusal was of unrecognized words."""
        super().__init__(message)
        self.prog, self.message, self.usage, self.takes_json = prog, message, usage, takes_json
        self.choice, self.conflicting = choice, conflicting
        self.in_words, self.durations = in_words, durations


@dataclass(frozen=True)
class SpeltValue:
    """A duration typed in words after one of `flags` (`typed`), and the text it reads (`near`)."""

    flags: tuple[str, ...]
    typed: str
    near: str


# The parsers a parse has entered, outermost first: an unknown flag is refused by the outermost
# (argparse collects the words no subcommand took), but is the innermost's to explain.
_ENTERED: ContextVar[list[argparse.ArgumentParser] | None] = ContextVar("entered", default=None)


_NEGATIVE_DURATION = re.compile(r"-\d+(?:\.\d+)?[a-z]+", re.IGNORECASE)


class _Parser(argparse.ArgumentParser):
    """A parser that raises `UsageError` where argparse would print usage and exit, so that the
    refusal is typed like every other (`entry.main`); its subcommands' parsers are of this class
    too (argparse makes them of the parser's own)."""

    def parse_args(self, args: Any = None, namespace: Any = None) -> Any:
        entered: list[argparse.ArgumentParser] = []
        token = _ENTERED.set(entered)
        try:
            parsed = super().parse_args(args, namespace)
        finally:
            _ENTERED.reset(token)
        # The command the line runs, as its help names it ("mcp-jobs jobs ls"): mend.py's
        # fallback fix is its --help.
        parsed.prog = entered[-1].prog if entered else self.prog
        return parsed

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        entered = _ENTERED.get()
        if entered is not None:
            entered.append(self)
        return super().parse_known_args(args, namespace)

    def _parse_optional(self, arg_string: str) -> Any:
        # `--older-than -5d`: a negative duration is a value (the command refuses it, with the
        # line meant), not an unknown flag, as argparse reads `-5` already.
        if _NEGATIVE_DURATION.fullmatch(arg_string):
            return None
        return super()._parse_optional(arg_string)

    def _get_values(self, action: argparse.Action, arg_strings: list[str]) -> Any:
        # `--state=--`: Python 3.11's argparse drops the `--` and gives the flag an empty list,
        # past its type and choices (an INTERNAL further on); 3.12 reads the value "--", as here.
        if action.option_strings and arg_strings == ["--"] and action.nargs in (None, "?", "+"):
            value = self._get_value(action, "--")
            self._check_value(action, value)
            return [value] if action.nargs == "+" else value
        return super()._get_values(action, arg_strings)

    def error(self, message: str) -> NoReturn:
        entered = _ENTERED.get()
        explains = entered[-1] if entered else self
        # No command chosen yet (the root, or `jobs` before its action) answers as any of its
        # commands might: --json is honoured when one of them takes it.
        takes_json = _takes_json(explains)
        refused = None
        durations: tuple[str, ...] = ()
        if message.startswith(_UNRECOGNIZED):
            message += _meant_flags(explains, message.removeprefix(_UNRECOGNIZED).split())
            durations = _duration_flags(explains)
        elif (choice := _INVALID_CHOICE.search(message)) is not None:
            choices = tuple(re.findall(r"'([^']*)'", choice[2]))
            refused = _refused_choice(explains, message, choice[1], choices)
            message += meant_note(choice[1], choices)[0]
        conflicting = _NOT_ALLOWED.search(message) is not None
        raise UsageError(
            explains.prog,
            message,
            explains.format_usage(),
            takes_json,
            refused,
            conflicting,
            in_words=_in_words(sys.exc_info()[1]),
            durations=durations,
        )


def _in_words(refusal: BaseException | None) -> SpeltValue | None:
    """The duration in words a flag's type refused, read from the argparse error being handled
    (argparse raises it while handling the type's `DurationInWords`)."""
    if not isinstance(refusal, argparse.ArgumentError):
        return None
    words = refusal.__context__
    if not isinstance(words, DurationInWords):
        return None
    return SpeltValue(tuple((refusal.argument_name or "").split("/")), words.typed, words.near)


def _duration_flags(parser: argparse.ArgumentParser) -> tuple[str, ...]:
    """The long flags of `parser` that take a duration (a `*-seconds` flag, `--older-than`)."""
    return tuple(
        flag
        for action in parser._actions
        if action.type in _DURATION_TYPES or action.metavar == "DURATION"
        for flag in action.option_strings
        if flag.startswith("--")
    )


def _refused_choice(
    parser: argparse.ArgumentParser, message: str, value: str, choices: tuple[str, ...]
) -> RefusedChoice | None:
    """The choice refused, read back from argparse's message ("argument --state: invalid
    choice: …"), which names the action by a flag or, for a command's name, its metavar."""
    named = re.match(r"argument ([^:]+): ", message)
    if named is None:
        return None
    names = set(named[1].split("/"))
    for action in parser._actions:
        if names & set(action.option_strings) or (
            not action.option_strings and named[1] in (action.metavar, action.dest)
        ):
            repeats = isinstance(action, argparse._AppendAction)
            return RefusedChoice(tuple(action.option_strings), value, choices, repeats)
    return None


def _takes_json(parser: argparse.ArgumentParser) -> bool:
    for action in parser._actions:
        if "--json" in action.option_strings:
            return True
        commands = action.choices.values() if isinstance(action, argparse._SubParsersAction) else ()
        if any(_takes_json(command) for command in commands):
            return True
    return False


_UNRECOGNIZED = "unrecognized arguments: "
_INVALID_CHOICE = re.compile(r"invalid choice: '([^']*)' \(choose from (.*)\)$")
# argparse's refusal of two flags of a mutually exclusive group.
_NOT_ALLOWED = re.compile(r"^argument \S+: not allowed with argument \S+$")


def _meant_flags(parser: argparse.ArgumentParser, words: list[str]) -> str:
    """ " (meant: --state for --states?)" for each unknown flag that plainly stands for one the
    command takes (`engine.meant`), else ""."""
    flags = [o for action in parser._actions for o in action.option_strings if o.startswith("--")]
    declared = {flag.removeprefix("--"): flag for flag in flags}
    hints = []
    for word in words:
        unknown = word.split("=", 1)[0]
        if not unknown.startswith("--"):
            continue
        meant = meant_as(unknown.removeprefix("--"), declared)
        if meant is not None:
            hints.append(f"{declared[meant]} for {unknown}?")
    return f" (meant: {', '.join(hints)})" if hints else ""


def build_parser() -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = _Parser(
        prog="mcp-jobs",
        description="Durable background jobs for Python, operated by people and AI agents.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    common = _common()
    common_no_json = _common(json_flag=False)

    serve = commands.add_parser(
        "serve", parents=[common_no_json], help="run the MCP server (stdio or streamable HTTP)"
    )
    serve.add_argument(
        "--transport",
        choices=("stdio", "http"),
        default="stdio",
        help="stdio (default) or streamable HTTP at http://HOST:PORT/mcp; HTTP requires a bearer "
        "token: $MCP_JOBS_TOKEN or --token-file",
    )
    serve.add_argument(
        "--host",
        default=DEFAULT_HOST,
        help=f"HTTP bind address ({DEFAULT_HOST}); any address beyond loopback (0.0.0.0, a LAN "
        "address) needs a token of at least 32 characters",
    )
    serve.add_argument(
        "--port",
        type=int,
        default=DEFAULT_PORT,
        help=f"HTTP port ({DEFAULT_PORT}; 0: any free one)",
    )
    serve.add_argument(
        "--token-file",
        metavar="PATH",
        help="read the HTTP bearer token from this file (default: $MCP_JOBS_TOKEN_FILE); "
        "not together with $MCP_JOBS_TOKEN",
    )
    serve.add_argument(
        "--session-idle-seconds",
        type=_seconds(float, positive=True),
        metavar="SECONDS",
        help="close an HTTP session with no request for this long, seconds or 30m, at most 7d "
        f"(default: $MCP_JOBS_SESSION_IDLE_SECONDS, else {DEFAULT_SESSION_IDLE_SECONDS:g})",
    )
    serve.add_argument(
        "--max-sessions",
        type=_positive(int),
        metavar="N",
        help="HTTP sessions open at once; one more is refused with 503 (default: "
        f"$MCP_JOBS_MAX_SESSIONS, else {DEFAULT_MAX_SESSIONS})",
    )
    add_allowed_host(serve)
    serve.add_argument(
        "--oauth-issuer",
        metavar="URL",
        help="take OAuth access tokens (JWTs) from this authorization server instead of the "
        "static token (default: $MCP_JOBS_OAUTH_ISSUER); scopes jobs:read, jobs:write, "
        "backfills:write, admin",
    )
    serve.add_argument(
        "--oauth-audience",
        metavar="AUD",
        help="the `aud` tokens must carry (default: $MCP_JOBS_OAUTH_AUDIENCE, else the resource "
        "URL)",
    )
    serve.add_argument(
        "--oauth-jwks-url",
        metavar="URL",
        help="the issuer's key set (default: $MCP_JOBS_OAUTH_JWKS_URL, else from its metadata)",
    )
    serve.add_argument(
        "--oauth-resource-url",
        metavar="URL",
        help="this server's public MCP URL, as clients reach it (default: "
        "$MCP_JOBS_OAUTH_RESOURCE_URL, else http://HOST:PORT/mcp)",
    )
    serve.add_argument(
        "--oauth-algorithms",
        metavar="ALGS",
        help="allowed signing algorithms, comma-separated (default: $MCP_JOBS_OAUTH_ALGORITHMS, "
        "else RS256,ES256)",
    )
    serve.add_argument(
        "--oauth-tenant-claim",
        metavar="CLAIM",
        help="the claim that pins a token to one tenant, as --tenant does (default: "
        "$MCP_JOBS_OAUTH_TENANT_CLAIM, else tenant)",
    )
    serve.add_argument(
        "--read-only", action="store_true", help="register no tool that changes anything"
    )
    serve.add_argument(
        "--confirm-writes",
        choices=["on", "off"],
        help="off: run_backfill/prune_history write without asking the person (default: "
        "$MCP_JOBS_CONFIRM_WRITES, else on)",
    )
    serve.add_argument(
        "--confirm-ttl-seconds",
        # Read by confirm_settings, as its variable is: a refusal echoes it as typed.
        metavar="SECONDS",
        help="how long a dry run's confirm token is good, seconds or 10m (default: "
        "$MCP_JOBS_CONFIRM_TTL_SECONDS, else 600)",
    )
    _logging(serve)

    worker = commands.add_parser(
        "worker",
        parents=[_common(json_flag=False, tenant=False)],
        help="run a worker (it serves every tenant's jobs)",
    )
    worker.add_argument(
        "--concurrency",
        type=int,
        default=_WORKER_CONCURRENCY,
        metavar="N",
        help="job bodies run at once (default: %(default)s)",
    )
    worker.add_argument(
        "--prefetch",
        type=int,
        help="claimed jobs that may wait for a free slot (default: 2 x concurrency; 0: none)",
    )
    worker.add_argument(
        "--queues",
        nargs="+",
        action="extend",  # `--queues a --queues b` is both, as a repeated flag reads
        metavar="QUEUE",
        help="claim these queues ('*': every queue; default: the queues of the app's jobs)",
    )
    worker.add_argument(
        "--metrics-port", type=int, help="serve Prometheus metrics on this port (default: off)"
    )
    worker.add_argument(
        "--metrics-host",
        metavar="HOST",
        help=f"the metrics endpoint's bind address ({DEFAULT_HOST}); it asks no token, so "
        "bind wider (0.0.0.0) only on a network you trust",
    )
    add_cap_flags(worker)
    _logging(worker)

    commands.add_parser(
        "demo", help="run the example app: a worker, the server, and an agent's session"
    )

    jobs = commands.add_parser("jobs", help="list, inspect, retry, cancel, drain jobs")
    actions = jobs.add_subparsers(dest="action", required=True, metavar="ACTION")
    ls = actions.add_parser("ls", parents=[common], help="list jobs, newest first")
    ls.add_argument("--state", action="append", choices=JOB_STATES, help="repeatable")
    ls.add_argument("--name")
    ls.add_argument("--queue")
    ls.add_argument("--tenant-id", dest="tenant_filter", help="only this tenant's jobs")
    ls.add_argument("--limit", type=int, default=50)
    ls.add_argument("--cursor")
    show = actions.add_parser("show", parents=[common], help="one job: record, steps, events")
    show.add_argument("job_id")
    show.add_argument("--run-id", help="an earlier run's steps (the job's rerun_of)")
    retry = actions.add_parser(
        "retry", parents=[common], help="requeue a failed or dead job, or run a delayed one now"
    )
    retry.add_argument("job_id")
    retry.add_argument("--include-cancelled", action="store_true")
    retry.add_argument(
        "--from-step", metavar="STEP", help="rerun in a new run from this step (a done job too)"
    )
    cancel = actions.add_parser("cancel", parents=[common], help="cancel a live job")
    cancel.add_argument("job_id")
    enqueue = actions.add_parser(
        "enqueue",
        parents=[common],
        help="enqueue job NAME with an input (its app: --app, or a live worker's published job)",
    )
    enqueue.add_argument("name", metavar="NAME", help="a registered job's name")
    enqueue.add_argument(
        "--input", metavar="JSON", help="the job's input, a JSON object ('{\"order_id\": 1}')"
    )
    enqueue.add_argument(
        "--delay-seconds", type=_seconds(float), metavar="SECONDS", help="run it this much later"
    )
    enqueue.add_argument("--run-at", metavar="WHEN", help="run it then: ISO 8601, or epoch ms")
    enqueue.add_argument(
        "--on-conflict",
        choices=get_args(OnConflict),
        default="dedupe",
        help="a live job of the same key: answer it (dedupe) or refuse (error)",
    )
    enqueue.add_argument("--key", help="the idempotency key, when the job's function needs one")
    enqueue.add_argument("--priority", type=int, help="higher is claimed first")
    describe = actions.add_parser("describe", parents=[common], help="the registered jobs")
    describe.add_argument("name", nargs="?")
    describe.add_argument("--limit", type=int, default=SHOWN, help="jobs in this page")
    describe.add_argument("--cursor", help="the last page's next_cursor")
    stats = actions.add_parser("stats", parents=[common], help="per-queue counts")
    stats.add_argument("--queues", nargs="+", action="extend", metavar="QUEUE")
    stats.add_argument("--limit", type=int, default=SHOWN, help="the busiest this many queues")
    diagnose = actions.add_parser("diagnose", parents=[common], help="what is stuck and why")
    diagnose.add_argument("--queue")
    drain = actions.add_parser(
        "drain", parents=[common], help="run every job due now in this process, then exit"
    )
    drain.add_argument("--queues", nargs="+", action="extend", metavar="QUEUE")
    drain.add_argument("--concurrency", type=int, default=8)

    for bulk, states, what in (
        ("retry-all", get_args(RetryState), "requeue every failed or dead job (or delayed)"),
        ("cancel-all", get_args(CancelState), "cancel every live job"),
    ):
        # Bulk by filter (`operations.bulk`): the plan, then --yes acts on it.
        each = actions.add_parser(bulk, parents=[common], help=f"{what} a filter matches")
        each.add_argument("--name")
        each.add_argument("--queue")
        each.add_argument("--tenant-id", dest="tenant_filter", help="only this tenant's jobs")
        each.add_argument("--state", action="append", choices=states, help="repeatable")
        each.add_argument("--error-code", help="only jobs whose stored last_error.code is this")
        each.add_argument(
            "--since-seconds",
            type=_seconds(int),
            metavar="N",
            help="only jobs last changed N s ago or less (N: seconds, or a duration: 12h, 7d)",
        )
        # Both given, the plan ran and nothing was done for a caller who asked to act.
        either = each.add_mutually_exclusive_group()
        either.add_argument("--dry-run", action="store_true", help="only print the plan")
        # Nothing asks: without --yes the plan is printed and nothing changes, as --dry-run.
        either.add_argument(
            "--yes",
            action="store_true",
            help="act on the plan; without it the plan is printed and nothing changes",
        )

    backfill = commands.add_parser(
        "backfill",
        parents=[common],
        help="list backfills, rehearse one (dry run), or run it with --write",
    )
    backfill.add_argument("name", nargs="?", help="omit to list the declared backfills")
    backfill.add_argument("--write", action="store_true", help="run it (default: dry run)")
    backfill.add_argument("--force", action="store_true", help="rerun one already completed")
    backfill.add_argument("--pending", action="store_true", help="list only pending ones")
    backfill.add_argument(
        "--runs",
        action="store_true",
        help="with NAME: its state and its ledger here, newest first, a page at a time",
    )
    backfill.add_argument(
        "--runs-limit", type=int, metavar="N", help="with --runs: runs per page, 1 to 200 (20)"
    )
    backfill.add_argument(
        "--runs-cursor", metavar="CURSOR", help="with --runs: the previous page's runs_cursor"
    )
    backfill.add_argument(
        "--wait",
        # MCP's `wait_seconds`: a number of seconds or a duration ("30s"); below 0 is the
        # command's own check, made before the pass starts (commands.backfill_command).
        type=_seconds(float),
        metavar="SECONDS",
        help="with --write: follow the pass this long (default: at a terminal, until it ends)",
    )

    add_queues(commands, common)
    add_dashboard(commands, common_no_json)
    add_limits(commands, common)
    add_events(commands, common)

    db = commands.add_parser("db", help="database maintenance")
    db_actions = db.add_subparsers(dest="action", required=True, metavar="ACTION")
    db_actions.add_parser("migrate", parents=[common], help="create or upgrade every table")
    prune = db_actions.add_parser(
        "prune",
        parents=[common],
        help="delete settled jobs past their retention (with their steps and events), and "
        "audit events of no job past the audit retention",
    )
    prune.add_argument(
        "--dry-run", action="store_true", help="only count what would go, per state and queue"
    )
    prune.add_argument(
        "--older-than",
        metavar="DURATION",
        help="prune rows finished longer ago than this (90s, 12h, 7d, ...) instead of the policy",
    )
    prune.add_argument(
        "--state",
        action="append",
        choices=SETTLED_STATES,
        help="only this settled state (repeatable; default: all four)",
    )
    db_actions.add_parser(
        "report",
        parents=[common],
        help="where the database is and as whom, the settings that refuse writes, what takes "
        "its room and who holds it up; only reads",
    )
    report = db_actions.add_parser(
        "nats-report",
        parents=[common],
        help="NATS: what takes the JetStream store's room, or (with KEY) a key as stored and "
        "how often it is written; only reads",
    )
    report.add_argument("key", nargs="?", metavar="KEY", help="a key of the bucket")
    return parser


def groups_with(action: str) -> list[str]:
    """The commands that have `action` among theirs (`diagnose`: `jobs`), so that an action
    typed under the wrong command (`queues diagnose`) is mended to the one that has it."""
    return [
        command
        for command, sub in _subcommands(build_parser()).items()
        if action in _subcommands(sub)
    ]


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}
