"""A refused argument's fix at the terminal: the command line as it was typed, with the flag
that carried the refused value set to the value nearest it that the check admits (the same
`InvalidArgumentError.nearest` an MCP refusal mends the caller's call with), such as a number
at its range's end; or without the flag, when it was given where it has no use (`LEFT_OUT`)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from engine.backfill.gate import (
    ENVIRONMENT_ARGUMENT,
    ENVIRONMENT_ENV,
    as_variable,
    resolve_environment,
)
from engine.command_line import END_OF_OPTIONS
from engine.driver_errors import DatabaseUrlInvalidError
from engine.drivers import DATABASE_URL_ENV, DEFAULT_DATABASE_URL, registered_schemes
from engine.drivers.urls import meant_url, postgres_url_correction, slashes_missing, sqlite_path
from engine.durations import spelt
from engine.errors import (
    LEFT_OUT,
    NAMED,
    NOTHING_NEAR,
    VALUE_LEFT_OUT,
    FlagMend,
    InvalidArgumentError,
    JobNotFoundError,
    JobsError,
)
from engine.meant import meant_choices, same_words
from engine.retention import DURATION_WORDS, meant_duration
from engine.shell_words import shell_word
from mcp_jobs.app_modules import load_apps_quietly
from mcp_jobs.cli.database_file import NoDatabaseFileError, is_sqlite_file
from mcp_jobs.cli.database_installed import NoSchemaError
from mcp_jobs.cli.exit_status import exit_status
from mcp_jobs.cli.plan_only import command_of, planned, writes
from mcp_jobs.cli.render import print_error
from mcp_jobs.config import Settings, seconds_in
from mcp_jobs.errors import LimitExceededError, TenantPinnedError
from mcp_jobs.fix_context import (
    PROGRAM,
    FixContext,
    absolute_url,
    pythonpath_for,
    unreachable_programs,
)
from mcp_jobs.operations.envelope import TEXT_LIMIT, error_payload, failure, sole
from mcp_jobs.operations.meant_job import MeantJobUnknownError
from mcp_jobs.tenant_bound import TENANT_BOUND, lost_note
from mcp_jobs.tool_commands import COMMAND_FOR_TOOL

if TYPE_CHECKING:  # the parser's modules import this one
    from mcp_jobs.cli.parser import RefusedChoice

URL_FLAG = "--database-url"
# Flags that name a file: a fix line names it by its absolute path, as `serve_line` does, so
# the line runs from any directory.
_PATH_FLAGS = ("--token-file",)
# The URL a DATABASE_URL_INVALID fix names, for a command that reads one backend only (else the
# default SQLite file): the NATS server on its own port, as the README runs it.
_URL_NEEDED = {"mcp-jobs db nats-report": "nats://127.0.0.1:4222"}
# The command line under way (without the program) and the command it runs ("mcp-jobs jobs
# ls"), for a refusal raised while it runs.
_ARGV: ContextVar[tuple[tuple[str, ...], str] | None] = ContextVar("cli_argv", default=None)


@contextmanager
def typed(argv: Sequence[str], command: str = "mcp-jobs") -> Iterator[None]:
    """Mark `argv` as the command line the block runs, of `command` (see `mended`)."""
    token = _ARGV.set((tuple(argv), command))
    try:
        yield
    finally:
        _ARGV.reset(token)


def typed_words() -> tuple[str, ...] | None:
    """The command line as typed (its words after the program), where a command runs."""
    line = _ARGV.get()
    return None if line is None else line[0]


def mended(exc: BaseException, fixes: FixContext) -> BaseException:
    """`_mended`'s answer, its fix the command's --help where the line would be longer than an
    error's text may be (`TEXT_LIMIT`): cut there (a 10 KB value typed), it would not run."""
    said = _mended(exc, fixes)
    if isinstance(said, JobsError) and len(fixes.qualify(said.fix)) > TEXT_LIMIT:
        typed_line = _ARGV.get()
        said.fix, said.next_call = help_line(typed_line[1] if typed_line else PROGRAM), None
    return said


def _mended(exc: BaseException, fixes: FixContext) -> BaseException:
    """`exc`, or, when it refuses a value typed on the command line, the same refusal whose fix
    runs: the command with the value nearest the refused one, or without a flag it has no use
    for; else, for a fix that only says what to pass, the command that lists what the argument
    names, or the command's --help. A URL that names no database comes back where it came
    from: the command with one that does, or the export of one. A `--tenant-id` other than the
    pinned tenant comes back as the command with the pinned one, and a store that is not there
    (a SQLite file, a schema, a prefix, a bucket) as the command on the one it plainly stands
    for, a write as a line that writes nothing there (`_on_store_meant`). A refused environment is
    MCP_JOBS_ENV's, mended to the declared one it stands for (`_environment_meant`)."""
    typed_line = _ARGV.get()
    if type(exc) is InvalidArgumentError and exc.argument in _ENVIRONMENT_SETTINGS:
        return _environment_meant(exc)  # (a subclass carries fields of its own)
    if isinstance(exc, NoDatabaseFileError) and exc.near is not None:
        return _on_store_meant(exc, (typed_line or ((), ""))[0], f"sqlite:///{exc.near}", fixes)
    if isinstance(exc, NoSchemaError) and exc.near_url is not None:
        return _on_store_meant(exc, (typed_line or ((), ""))[0], exc.near_url, fixes)
    if isinstance(exc, DatabaseUrlInvalidError) and not exc.answered:
        return _url_mended(exc, typed_line or ((), ""), fixes)
    if typed_line is not None and isinstance(exc, FlagMend):
        return _flag_mended(exc, typed_line[0], fixes)
    if typed_line is not None and isinstance(exc, LimitExceededError):
        return _at_cap(exc, typed_line[0], fixes)
    if typed_line is not None and isinstance(exc, JobNotFoundError):
        return _id_held(exc, typed_line[0], fixes)
    if typed_line is not None and isinstance(exc, TenantPinnedError):
        return _tenant_pinned(exc, typed_line[0], fixes)
    if typed_line is not None and isinstance(exc, JobsError) and exc.code in _SLOTTED:
        return _slotted(exc, typed_line[0], fixes)
    if typed_line is not None and isinstance(exc, JobsError) and exc.code in NAMED:
        return _name_meant(exc, typed_line[0], fixes)
    if typed_line is None or not isinstance(exc, InvalidArgumentError):
        return exc
    argv, command = typed_line
    words = None
    in_words = _duration_in_words(exc)
    if in_words is not None:
        words = with_value(argv, _flags(exc.argument), exc.value, in_words)
    elif type(exc) is InvalidArgumentError and exc.nearest is LEFT_OUT:
        words = _without_flag(argv, _flags(exc.argument)) or _without_word(argv, exc.value)
    elif type(exc) is InvalidArgumentError and exc.nearest is VALUE_LEFT_OUT:
        words = _without_value(argv, _flags(exc.argument), exc.value)
    elif type(exc) is InvalidArgumentError and exc.nearest is not NOTHING_NEAR:
        words = with_value(argv, _flags(exc.argument), exc.value, exc.nearest)
    if words is not None:
        if exc.argument == "app" and isinstance(exc.nearest, str):
            fixes = _with_app(fixes, exc.value, exc.nearest)
        # The URL as typed may hold a password: `fixes` writes it back as every fix line has it.
        fix = fixes.command(*fix_words(words))
    elif exc.fix_said:
        fix = _fallback(exc.argument, argv, command, fixes)
    else:
        return exc
    return exc.mended(fix)


_ENVIRONMENT_SETTINGS = (ENVIRONMENT_ARGUMENT, ENVIRONMENT_ENV)


def _environment_meant(exc: InvalidArgumentError) -> JobsError:
    """A refused environment as MCP_JOBS_ENV's refusal: the CLI has no environment flag, its
    `environment=` is the variable's value. One refused before the command imported its app
    (cli/entry.py) is checked again now that `refusal_context` has: the fix is then the
    environment the app declares that it stands for (`prod uction`: production)."""
    if exc.argument == ENVIRONMENT_ENV:
        try:
            resolve_environment()
        except InvalidArgumentError as again:
            return again
        return exc
    return as_variable(exc)


# Refusals of a value only the caller knows: the line typed with the flag that gives it, its
# value a placeholder (the engine's fix is a Python call, another face's).
_SLOTTED = {
    "JOB_TENANT_REQUIRED": ("--tenant", "TENANT"),
    "IDEMPOTENCY_KEY_MISSING": ("--key", "KEY"),
}


def _slotted(exc: JobsError, argv: Sequence[str], fixes: FixContext) -> JobsError:
    flag, placeholder = _SLOTTED[exc.code]
    if not _typed_flag(argv, flag):
        exc.fix, exc.next_call = fixes.command(*fix_words(_appended(argv, flag, placeholder))), None
    return exc


def _with_app(fixes: FixContext, typed: object, meant: str) -> FixContext:
    """`fixes` for the line whose `--app` is `meant` in place of `typed`: with the PYTHONPATH a
    shell elsewhere needs to import it, which the context of the name typed (importing from
    nowhere) could not know."""
    apps = tuple(meant if app == typed else app for app in fixes.apps)
    pythonpath = pythonpath_for(apps, Path.cwd(), os.environ.get("PYTHONPATH"))
    kept = tuple(pair for pair in fixes.assignments if pair[0] != "PYTHONPATH")
    path = () if pythonpath is None else (("PYTHONPATH", pythonpath),)
    return replace(fixes, apps=apps, assignments=(*kept, *path))


def _at_cap(exc: LimitExceededError, argv: Sequence[str], fixes: FixContext) -> JobsError:
    """LIMIT_EXCEEDED for a value typed after a flag (`--limit 500`) as the line typed with the
    flag at the cap: the tool call's command would add a `--json` nobody typed."""
    words = with_value(argv, _flags(exc.argument), exc.value, exc.limit)
    if words is None:
        return exc  # the value came from elsewhere (a count of queue names): the fix stands
    exc.fix = fixes.command(*fix_words(words))
    return exc


def _url_mended(
    exc: DatabaseUrlInvalidError, typed_line: tuple[Sequence[str], str], fixes: FixContext
) -> DatabaseUrlInvalidError:
    """DATABASE_URL_INVALID for a URL that cannot name a database, fixed where the URL came
    from: the command with a URL it can use where `--database-url` gave it (it outranks the
    variable, so an export changed nothing), else the export. The URL is absolute: the line
    runs from any directory."""
    argv, command = typed_line
    url = _meant(argv) or _URL_NEEDED.get(command)
    correction = None if url else _correction(argv)
    if correction is not None:  # a PostgreSQL URL: another database is no fix for it
        exc.fix, exc.next_call = correction, None
        return exc
    return _with_url(exc, argv, url or _fresh_sqlite(fixes), fixes)


# The read that shows what a store holds: a write's fix on a store it was not pointed at.
_SHOWS_STORE = ("jobs", "stats")


def _on_store_meant(
    exc: DatabaseUrlInvalidError, argv: Sequence[str], url: str, fixes: FixContext
) -> DatabaseUrlInvalidError:
    """`exc` for a URL naming no store, whose fix is on the store it plainly meant (a SQLite
    file, a schema, a prefix or a bucket a slip away): a read as typed; a write as its plan,
    else as the read that shows that store, as any guessed line (`plan_only`): sibling apps'
    stores are often a letter apart (`app1:`, `app2:`). A write's line names the store by the
    flag: an export would aim the write itself at it."""
    if not writes(argv):
        return _with_url(exc, argv, url, fixes)
    plan = planned(argv)
    # `--json` as typed: the line answers in the form the caller reads.
    shown = plan if plan is not None else [*_SHOWS_STORE, *(["--json"] if "--json" in argv else [])]
    exc.fix = fixes.command(*_appended(fix_words(shown), URL_FLAG, url))
    exc.next_call = None
    return exc


def _with_url(
    exc: DatabaseUrlInvalidError, argv: Sequence[str], url: str, fixes: FixContext
) -> DatabaseUrlInvalidError:
    """`exc` whose fix is `url` given where the refused one came from: the flag, else the
    variable."""
    if _typed_flag(argv, URL_FLAG):
        exc.fix = fixes.command(*_appended(fix_words(argv), URL_FLAG, url))
    else:
        exc.fix = f"export {DATABASE_URL_ENV}={shell_word(url)}"
    exc.next_call = None
    return exc


def _refused(argv: Sequence[str]) -> tuple[str | None, str]:
    """The refused URL as given, and where: the flag, else the variable."""
    if _typed_flag(argv, URL_FLAG):
        return _typed_value(argv, URL_FLAG), URL_FLAG
    return os.environ.get(DATABASE_URL_ENV), DATABASE_URL_ENV


def _correction(argv: Sequence[str]) -> str | None:
    """What to correct in a refused PostgreSQL URL that has no certain mend, where it was given."""
    raw, where = _refused(argv)
    return postgres_url_correction(raw, where) if raw else None


def _meant(argv: Sequence[str]) -> str | None:
    """The URL the refused one plainly stands for (`urls.meant_url`), as a fix may print it and
    opens from any directory; None when there is none, or it is still no URL a driver opens."""
    raw = _refused(argv)[0]
    meant = meant_url(raw, registered_schemes()) if raw else None
    if meant is None and raw and "://" not in raw and is_sqlite_file(Path(raw)):
        # A bare path (`--database-url jobs.db`) to a SQLite file: that file, not the default.
        return "sqlite:///" + os.path.abspath(raw)
    if meant is None:
        return None
    meant = _relative_unless_rooted(raw or "", meant)
    try:
        if meant.startswith("sqlite://"):
            sqlite_path(meant)
    except JobsError:
        return None
    return absolute_url(meant, Path.cwd())


def _relative_unless_rooted(raw: str, meant: str) -> str:
    """`meant` for a `sqlite:/PATH` short of its slashes: read as the absolute `/PATH` only
    where that file's directory is there and is not the filesystem's root, else as the relative
    path its refusal's cause writes (`sqlite:///relative.db`): `sqlite:/jobs.db` is no file at
    the root, where a command may not even write."""
    if slashes_missing(raw, registered_schemes()) != "sqlite":
        return meant
    path = raw.partition(":")[2]
    folder = os.path.dirname(path)
    if not path.startswith("/") or (folder != "/" and os.path.isdir(folder)):
        return meant
    return "sqlite:///" + path.lstrip("/")


def _typed_value(argv: Sequence[str], flag: str) -> str | None:
    for at, word in enumerate(argv):
        if word == flag and at + 1 < len(argv):
            return argv[at + 1]
        if word.startswith(flag + "="):
            return word.partition("=")[2]
    return None


def _fresh_sqlite(fixes: FixContext) -> str:
    """The default SQLite file as an absolute URL, or one beside it where the refused URL
    names that file (another program's file, a device)."""
    url = absolute_url(DEFAULT_DATABASE_URL, Path.cwd())
    if url is None or url != fixes.database_url:
        return url or DEFAULT_DATABASE_URL
    return url.removesuffix(".db") + "-2.db"


def _name_meant(exc: JobsError, argv: Sequence[str], fixes: FixContext) -> JobsError:
    """JOB_UNKNOWN, QUEUE_UNKNOWN or BACKFILL_UNKNOWN for a name that plainly stands for a
    known one (its `meant`) as the command with that name, an enqueue's as the meant job takes
    it (`MeantJobUnknownError`); a slip of the keys, or an enqueue the meant job still refuses,
    as the line that writes nothing (`plan_only`)."""
    details = exc.details or {}
    given, meant = details.get(NAMED[exc.code]), details.get("meant")
    if not isinstance(given, str) or meant is None or list(argv).count(given) != 1:
        return exc
    words = [meant if word == given else word for word in argv]
    taken = _as_meant_takes(words, exc) if isinstance(exc, MeantJobUnknownError) else words
    exc.fix = _written(
        taken if taken is not None and same_words(given, meant) else planned(words), argv, fixes
    )
    exc.next_call = None
    return exc


# `jobs enqueue`'s flag for each enqueue_job argument (tool_commands).
_ENQUEUE_FLAGS = {name: flag for name, flag in COMMAND_FOR_TOOL["enqueue_job"][1] if flag}


def _as_meant_takes(words: list[str], exc: MeantJobUnknownError) -> list[str] | None:
    """`words` (`jobs enqueue` with the job meant) as that job takes them: `--input` renamed,
    `--key` the one it computes, a placeholder for what only the caller knows; None where it
    still refuses them, or a value was not typed after its flag: a line that would not run."""
    if exc.refused is not None:
        return None
    for name, value in exc.changed.items():
        flag = _ENQUEUE_FLAGS.get(name)
        typed = None if flag is None else _typed_value(words, flag)
        shown = json.dumps(value, ensure_ascii=False) if name == "input" else value
        mended = None if flag is None else with_value(words, {flag}, typed, shown)
        if mended is None:
            return None
        words = mended
    for name in exc.left_out:
        flag = _ENQUEUE_FLAGS.get(name)
        kept = None if flag is None else _without_flag(words, {flag})
        if kept is None:
            return None
        words = kept
    for slotted in exc.slotted:
        flag, placeholder = _SLOTTED[slotted.code]
        if not _typed_flag(words, flag):
            words = _appended(words, flag, placeholder)
    return words


def _id_held(exc: JobNotFoundError, argv: Sequence[str], fixes: FixContext) -> JobNotFoundError:
    """JOB_NOT_FOUND for a word that holds one job id (quoted with spaces, after "job", in
    capitals) as the command with that id (engine.errors.id_within)."""
    inner = exc.meant_id
    if inner is None or list(argv).count(exc.job_id) != 1:
        return exc
    words = [inner if word == exc.job_id else word for word in argv]
    # The listing's call no longer is the way on: the command with the id is.
    exc.fix, exc.next_call = fixes.command(*fix_words(words)), None
    return exc


def _tenant_pinned(
    exc: TenantPinnedError, argv: Sequence[str], fixes: FixContext
) -> TenantPinnedError:
    """TENANT_PINNED for a `--tenant-id` other than the pinned `--tenant` as the command with
    the pinned one, its other filters kept but what went with the tenant typed (`TENANT_BOUND`:
    `--cursor`), as its plan: it acts for another tenant than the one typed, so the line shows
    what it would do first (`plan_only`)."""
    words = with_value(argv, _flags("tenant_id"), exc.asked, exc.pinned)
    if words is None:
        return exc
    dropped: list[str] = []
    for name in TENANT_BOUND:
        flags = _flags(name)
        kept = _without_flag(words, flags)
        if kept is not None:
            words = kept
            dropped += sorted(flag for flag in flags if _typed_flag(argv, flag))
    exc.cause += lost_note(dropped, exc.asked)
    exc.fix, exc.next_call = _written(planned(words), words, fixes), None
    return exc


def _written(words: Sequence[str] | None, typed: Sequence[str], fixes: FixContext) -> str:
    """`words` as a fix line in `fixes`; None (a guessed line that would write and has no
    plan) as the --help of the command `typed` runs."""
    if words is None:
        return help_line(" ".join([PROGRAM, *command_of(typed)]))
    return fixes.command(*fix_words(words))


def help_line(command: str) -> str:
    """`command --help` (`command` as its help names it: "mcp-jobs jobs ls"), with `mcp-jobs`
    named by its full path where the shell would not find this installation's, as every fix
    names it (`fix_context.unreachable_programs`)."""
    program, _, rest = command.partition(" ")
    path = dict(unreachable_programs(os.environ.get("PATH"))).get(program)
    return " ".join(word for word in (shell_word(path or program), rest, "--help") if word)


def _flag_mended(exc: FlagMend, argv: Sequence[str], fixes: FixContext) -> FlagMend:
    """The command with the refusal's flag set to the nearest value that works: an `export` of
    a variable changes nothing where a flag wins over it, and a bind refusal names no command.
    `exc` as it is when nothing would be mended."""
    if exc.flag is None or exc.nearest is None:
        return exc
    words = with_value(argv, {exc.flag}, exc.typed, exc.nearest)
    if words is None and exc.set_anyway and not _typed_flag(argv, exc.flag):
        words = _appended(argv, exc.flag, _word(exc.nearest))
    return exc if words is None else exc.with_fix(fixes.command(*fix_words(words)))


def choice_mended(choice: RefusedChoice, argv: Sequence[str]) -> tuple[list[str], bool] | None:
    """`argv` with a refused choice as the choices it stands for (`engine.meant`): `Dead` as
    `dead`, `failed,dead` of a repeatable flag as `--state failed --state dead`, a command's
    name slipped (`job`) as the name; and whether that was a guess (a slip of the keys), whose
    line the caller shows as its plan (`plan_only`). None when a piece stands for no choice."""
    pieces = choice.value.split(",") if choice.repeats else [choice.value]
    found = meant_choices(pieces, choice.choices)
    if found is None:
        return None
    values, guessed = found
    words = list(argv)
    for n, word in enumerate(words):
        flag, equals, given = word.partition("=")
        if not choice.flags and word == choice.value:
            words[n : n + 1] = values[:1]
        elif equals and flag in choice.flags and given == choice.value:
            words[n : n + 1] = [f"{flag}={value}" for value in values]
        elif word in choice.flags and words[n + 1 : n + 2] == [choice.value]:
            words[n : n + 2] = [w for value in values for w in (word, value)]
        else:
            continue
        return words, guessed
    return None


def _appended(words: Sequence[str], *flag: str) -> list[str]:
    """`words` with `flag` (and its value) added before a `--`, past which it would be a name."""
    at = words.index(END_OF_OPTIONS) if END_OF_OPTIONS in words else len(words)
    return [*words[:at], *flag, *words[at:]]


def _typed_flag(argv: Sequence[str], flag: str) -> bool:
    return any(word == flag or word.startswith(flag + "=") for word in argv)


def refusal_context(settings: Settings) -> FixContext:
    """The context a command's refusal is written in, with its apps imported first where it
    failed before it imported them (a flag out of range): what they declare (`SHOP_DB`)
    belongs in the fix all the same."""
    load_apps_quietly(settings.apps)
    return FixContext.of(settings, face="cli")


def print_failure(exc: BaseException, settings: Settings, where: str) -> int:
    """A long-running command's failure (serve, worker, dashboard) on stderr as code, cause and
    fix, the fix mended and written in this process's context as every command's is; its exit
    status, as every command's (`exit_status`)."""
    fixes = refusal_context(settings)
    refused = mended(sole(exc), fixes)
    envelope = failure(error_payload(refused, where=where, context=fixes))
    print_error(envelope["error"])
    return exit_status(envelope)


def _fallback(argument: str, argv: Sequence[str], command: str, fixes: FixContext) -> str:
    listing = fixes.listing(argv[0] if argv else "", argument)
    return listing if listing is not None else help_line(command)


def fix_words(words: Sequence[str]) -> list[str]:
    """The typed `words` as a fix line writes them: without the URL (`fixes` writes it back as
    every fix line has it), and each file a flag names by its absolute path."""
    kept = without_flag(words, URL_FLAG)
    for n, word in enumerate(kept):
        flag, equals, path = word.partition("=")
        if equals and flag in _PATH_FLAGS and path:
            kept[n] = f"{flag}={os.path.abspath(path)}"
        elif word in _PATH_FLAGS and kept[n + 1 : n + 2] not in ([], [""]):
            kept[n + 1] = os.path.abspath(kept[n + 1])
    return kept


def without_flag(words: Sequence[str], flag: str) -> list[str]:
    """`words` without `flag` and its value (`--flag V` or `--flag=V`)."""
    kept: list[str] = []
    skip = False
    for word in words:
        if skip:
            skip = False
        elif word == flag:
            skip = True
        elif not word.startswith(flag + "="):
            kept.append(word)
    return kept


def _flags(argument: str) -> set[str]:
    """The flags that may carry `argument`: its own name as a flag, and the one a tool's
    command gives it (`wait_seconds` is `backfill --wait`)."""
    flags = {"--" + argument.removeprefix("--").replace("_", "-")}
    for _, arguments in COMMAND_FOR_TOOL.values():
        flags |= {flag for name, flag in arguments if name == argument and flag is not None}
    return flags


def _duration_in_words(exc: InvalidArgumentError) -> str | None:
    """The duration a refused value written in words reads as ("7 days": "7d"; past ten years,
    the bound), when the argument takes a duration (`db prune --older-than`), else None."""
    if type(exc) is not InvalidArgumentError:  # a subclass carries fields of its own
        return None
    if not (isinstance(exc.value, str) and exc.expected.startswith(DURATION_WORDS)):
        return None
    words = spelt(exc.value)
    return None if words is None else meant_duration(words)


def with_value(
    argv: Sequence[str], flags: set[str], value: object, nearest: object
) -> list[str] | None:
    """`argv` with the first of `flags` that carries `value` set to `nearest` (a list: the
    words of a flag that takes several); None when none does (the value came from elsewhere,
    or in other units)."""
    words = list(argv)
    several = [_word(v) for v in nearest] if isinstance(nearest, list | tuple) else None
    for n, word in enumerate(words):
        flag, equals, given = word.partition("=")
        if equals and flag in flags and _means(given, value):
            words[n : n + 1] = [f"{flag}={_word(nearest)}"] if several is None else [flag, *several]
            return words
        if word in flags:  # the value may be any of the words up to the next flag
            for at in range(n + 1, len(words)):
                if at > n + 1 and words[at].startswith("-"):
                    break  # the first is the flag's own, even a negative number
                if _means(words[at], value):
                    words[at : at + 1] = [_word(nearest)] if several is None else several
                    return words
    return None


def _without_flag(argv: Sequence[str], flags: set[str]) -> list[str] | None:
    """`argv` without `flags` and their values, whatever those are (the command has no use for
    the flag), every time one is typed (a repeated flag's last is what the parser read); None
    when none was."""
    kept: list[str] = []
    skip = False
    for n, word in enumerate(argv):
        if skip:
            skip = False
        elif word == END_OF_OPTIONS:
            return None if len(kept) == n else [*kept, *argv[n:]]
        elif word.partition("=")[0] in flags and "=" in word:
            continue
        elif word in flags and n + 1 < len(argv):
            skip = True
        else:
            kept.append(word)
    return None if len(kept) == len(argv) else kept


def _without_value(argv: Sequence[str], flags: set[str], value: object) -> list[str] | None:
    """`argv` without the one of `flags` that carries `value` (a repeatable flag's other values
    kept); None when none does."""
    for n, word in enumerate(argv):
        flag, equals, given = word.partition("=")
        if equals and flag in flags and given == value:
            return [*argv[:n], *argv[n + 1 :]]
        if word in flags and list(argv[n + 1 : n + 2]) == [value]:
            return [*argv[:n], *argv[n + 2 :]]
    return None


def _without_word(argv: Sequence[str], value: object) -> list[str] | None:
    """`argv` without the one positional word that is `value` (`queues pause mail --job x`:
    mail), when it is typed once and after no flag; None otherwise."""
    at = [n for n, word in enumerate(argv) if isinstance(value, str) and word == value]
    if len(at) != 1 or (at[0] > 0 and argv[at[0] - 1].startswith("-")):
        return None
    return [word for n, word in enumerate(argv) if n != at[0]]


def _means(token: str, value: object) -> bool:
    """Whether the typed `token` is the refused `value` (a number as argparse parsed it)."""
    if isinstance(value, str):
        return token == value
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    try:
        # A whole number past a float's precision (99999999999999999999) compares as int.
        return int(token) == value if isinstance(value, int) else float(token) == value
    except ValueError:
        # A `*-seconds` flag typed as a duration ("30d"), as its parser read it (whole for an
        # int flag: `--since-seconds 7300d` is 630720000).
        return seconds_in(token) == value


def _word(value: object) -> str:
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)
