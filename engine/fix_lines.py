"""THE rule that makes an `mcp-jobs …` fix line act on what the process that wrote it acts on:
the flags naming that context (`--database-url`, `--app`, …) appended when the line lacks them.

A fix such as `mcp-jobs jobs ls --json`, run in a shell elsewhere, opens another database (a
relative SQLite URL, or the default `./.mcp-jobs/jobs.db`) and imports no app. The MCP and CLI
faces write their whole context into every line (mcp_jobs/fix_context.py: environment and
`PYTHONPATH` too) through `absent_flags` and `spliced`; an error raised through the Python API
gets the part the client knows (`CommandContext`): the database it uses and, when they can be
named, the modules that declared its registered jobs. A password is never written.

A `memory://` store lives inside the client's process: a shell's `--database-url memory://`
opens a new, empty one. There a line becomes the call on the same client (`jobs`) that does
the same (`python_call`), or, where none does, words saying so (`on_private_store`): the idea
of the MCP face's `private_call`, for a Python caller.
"""

from __future__ import annotations

import functools
import importlib.machinery
import inspect
import os
import re
import shlex
import sys
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

from engine.client_calls import (
    Given,
    first_page,
    given_of,
    mended_call,
    python_call,
    template_filled,
)
from engine.command_line import (
    DATABASE_FLAG,
    END_OF_OPTIONS,
    MEMORY_URL,
    PROGRAM,
    TAKES_CONTEXT,
    end_of_options,
)
from engine.drivers.urls import URL_FROM_ENV, printable_url, sqlite_path
from engine.environment import NAME_PATTERN
from engine.errors import (
    NOTHING_NEAR,
    CursorInvalidError,
    InvalidArgumentError,
    JobNotFoundError,
    JobsError,
    JobUnknownError,
)
from engine.shell_words import for_shlex, shell_join, shell_word
from schemas.jobs import JobFilter, JobPage, JobRecord
from schemas.trace import JobTrace

T = TypeVar("T")
_OPERATORS = frozenset(";&|<>()`")


def absolute_url(url: str, cwd: Path) -> str | None:
    """`url` as a process anywhere opens the same database with and a fix line may print: a
    relative SQLite path made absolute against `cwd`, a PostgreSQL password removed, and None
    for another URL that carries a secret (see `printable_url`)."""
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if scheme == "sqlite":
        try:
            path = sqlite_path(url)
        except JobsError:
            return url  # a URL no driver opens: the fix says so when it runs
        return url if path.startswith("/") else "sqlite:///" + os.path.normpath(cwd / path)
    return printable_url(url)


def command_words(fix: str) -> list[str] | None:
    """The words bash reads in `fix`, or None when it is not one command this can extend
    (unbalanced quotes, a pipeline or a list)."""
    try:
        # shlex reads no `$'…'` (`shell_word`'s form of a value with a control character).
        lexer = shlex.shlex(for_shlex(fix), posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        words = list(lexer)
    except ValueError:
        return None
    if any(w and set(w) <= _OPERATORS for w in words):
        return None
    return words


def assignments_ahead(words: Sequence[str]) -> int:
    """How many of `words` are `NAME=value` assignments in front of the command."""
    head = 0
    while head < len(words) and "=" in words[head] and is_name(words[head].split("=")[0]):
        head += 1
    return head


def absent_flags(rest: Sequence[str], flags: Iterable[tuple[str, str]]) -> list[str]:
    """The words to append to an `mcp-jobs` command whose words after the program, up to any
    `--`, are `rest`: each of `flags` (an option and its value, one shell word) it does not
    give already; none for a command that takes no context flags."""
    if not rest or rest[0] not in TAKES_CONTEXT:
        return []
    given = {w.split("=", 1)[0] for w in rest if w.startswith("--")}
    return [w for flag, value in flags if flag not in given for w in _flag_words(flag, value)]


def _flag_words(flag: str, value: str) -> tuple[str, ...]:
    """`flag value`, or `flag=value` where the value (a shell word, maybe quoted) starts with
    `-`: apart, the parser reads it as a flag of its own (`--tenant -x`)."""
    bare = value.removeprefix("$").lstrip("'\"")
    return (f"{flag}={value}",) if bare.startswith("-") else (flag, value)


def spliced(
    fix: str,
    words: Sequence[str],
    head: int,
    suffix: Sequence[str],
    reach: Callable[[str], str] = lambda text: text,
) -> str:
    """`fix` (read as `words`, its program at `head`) with `suffix` appended: before a `--`,
    past which every word is a name. `reach` rewrites the program's part of the line."""
    rest = words[head + 1 :]
    ended = end_of_options(rest)
    if suffix and ended < len(rest):
        line = " ".join(_assignment(w) for w in words[:head])
        line = f"{line} {reach(shell_join(words[head : head + 1 + ended]))}".lstrip()
        return " ".join([line, *suffix, shell_join(rest[ended:])])
    return " ".join([reach(fix), *suffix])


def with_flags(fix: str, flags: Sequence[tuple[str, str]]) -> str:
    """`fix` with each of `flags` it lacks appended when it is an `mcp-jobs` command taking
    them; any other line as it is. Applying it twice changes nothing the second time. A
    `memory://` database is never appended: the line is `on_private_store`'s instead."""
    database = dict(flags).get(DATABASE_FLAG)
    if database is not None and is_private(database):
        return on_private_store(fix)
    words = command_words(fix)
    if words is None:
        return fix
    head = assignments_ahead(words)
    if head >= len(words) or words[head] != PROGRAM:
        return fix
    rest = words[head + 1 :]
    suffix = absent_flags(rest[: end_of_options(rest)], flags)
    return spliced(fix, words, head, suffix) if suffix else fix


def is_private(url: str) -> bool:
    """Whether the database `url` names lives inside the process that opened it (`memory://`):
    no command started elsewhere reaches it."""
    return url.lower().startswith("memory:")


# The words where a command would act on a `memory://` store (`on_private_store`) and no call
# on the client does what it does.
PRIVATE_STORE_LINE = (
    "this client's memory:// store lives inside its process and no command reaches it ({line} "
    "would open a new, empty one): connect this process and the command to one SQLite file or "
    'PostgreSQL URL (connect("sqlite:///ABSOLUTE/PATH/jobs.db") and --database-url '
    "sqlite:///ABSOLUTE/PATH/jobs.db)"
)


def on_private_store(fix: str) -> str:
    """`fix` as the caller of a client on a `memory://` store runs it: an `mcp-jobs` command
    that would act on a store (one naming no other database) becomes the call on that client
    doing the same (`python_call`), else `PRIVATE_STORE_LINE`; any other line, and `serve`
    (a server of its own), as it is. Applying it twice changes nothing the second time."""
    words = command_words(fix)
    if words is None:
        return fix
    head = assignments_ahead(words)
    rest = words[head + 1 :]
    if head >= len(words) or words[head] != PROGRAM or not rest:
        return fix
    if rest[0] not in TAKES_CONTEXT or rest[0] == "serve":
        return fix
    named = _option_value(rest[: end_of_options(rest)], DATABASE_FLAG)
    if named is not None and not is_private(named):
        return fix  # it names a database of its own, which it reaches
    call = python_call(rest)
    if call is not None:
        return call
    flag = [] if named is not None else [DATABASE_FLAG, MEMORY_URL]
    return PRIVATE_STORE_LINE.format(line=spliced(fix, words, head, flag))


def _option_value(words: Sequence[str], flag: str) -> str | None:
    """The value `words` give `flag` (`--flag VALUE` or `--flag=VALUE`), else None."""
    for at, word in enumerate(words):
        if word.startswith(flag + "="):
            return word.partition("=")[2]
        if word == flag and at + 1 < len(words):
            return words[at + 1]
    return None


def is_name(word: str) -> bool:
    return NAME_PATTERN.fullmatch(word) is not None


def _assignment(word: str) -> str:
    name, _, value = word.partition("=")
    return f"{name}={shell_word(value)}"


def needs_on_path(module: str, places: Sequence[str]) -> bool:
    """True when `module` is found in one of `places` and in no other entry of `sys.path` (nor
    by another import finder): a process whose path lacks them does not import it. Asked of
    every import finder, with the path search narrowed to the other entries; nothing is
    imported."""
    top = module.split(".", 1)[0]
    apart = {os.path.realpath(p) for p in places}
    others = [p for p in sys.path if p and os.path.realpath(p) not in apart]
    found_here = importlib.machinery.PathFinder.find_spec(top, list(places)) is not None
    if not found_here:
        return False
    for finder in sys.meta_path:
        find = getattr(finder, "find_spec", None)
        if find is None:
            continue
        try:
            spec = (
                importlib.machinery.PathFinder.find_spec(top, others)
                if finder is importlib.machinery.PathFinder
                else find(top, None)
            )
        except Exception:  # a third-party finder that chokes here cannot import it either
            continue
        if spec is not None:
            return False
    return True


def importable_anywhere(module: str, cwd: Path) -> bool:
    """Whether a process started in another directory, with no PYTHONPATH, imports `module`:
    not a script's `__main__`, nor found only in the working or the script's directory or
    through PYTHONPATH (the faces write PYTHONPATH in front; a bare `--app` would fail)."""
    if module == "__main__":
        return False
    local = [str(cwd), sys.path[0] if sys.path and sys.path[0] else str(cwd)]
    local += [e for e in os.environ.get("PYTHONPATH", "").split(os.pathsep) if e]
    return not needs_on_path(module, local)


def import_root(module: str) -> str | None:
    """The directory a shell elsewhere needs on PYTHONPATH to import `module` as this process
    did (a worker started in the app's directory), or None when it imports anywhere: for a
    `python -c` fix that is stored or logged and run wherever its reader is."""
    loaded = sys.modules.get(module)
    file = getattr(loaded, "__file__", None)
    if not isinstance(file, str) or importable_anywhere(module, Path.cwd()):
        return None
    root = Path(file).resolve().parent
    # A package's `__init__.py` sits one directory deeper than its dotted name says.
    for _ in range(module.count(".") + (Path(file).name == "__init__.py")):
        root = root.parent
    return str(root)


# A fix's call that builds a client: on `url` (a placeholder) or a URL in quotes, with the
# registry it names, if any. Not a library's (`sqlite3.connect(path)`): that takes no URL.
_CONNECT = re.compile(r"(?<![\w.])connect\((url|'[^']*'|\"[^\"]*\")((?:, registry=[\w.]+)?)\)")


@dataclass(frozen=True)
class CommandContext:
    """What a client's fix lines are given: the database it opened, as a line may print it
    (None: its URL holds a secret, read from MCP_JOBS_DATABASE_URL where the line runs), and
    the app modules `apps()` names (empty: none, or not all of them can be named)."""

    database: str | None
    apps: Callable[[], Sequence[str]] = tuple
    # Whether the client was given a registry of its own (not the default one `@job` fills):
    # a fix that builds a client again must pass it too, or it knows none of these jobs.
    own_registry: bool = False

    @classmethod
    def of(
        cls, url: str, apps: Callable[[], Sequence[str]] = tuple, *, own_registry: bool = False
    ) -> CommandContext:
        return cls(absolute_url(url, Path.cwd()), apps, own_registry)

    def connect_line(self, fix: str) -> str:
        """`fix` with its call building a client (`connect(url)`, a DRIVER_CLOSED's; one on a
        URL with its password taken out, a DRIVER_OTHER_LOOP's) made this client's: its URL,
        or none where that holds a secret (connect() then reads MCP_JOBS_DATABASE_URL), and its
        registry, which the `jobs` the caller holds still has."""

        def written(found: re.Match[str]) -> str:
            url = "" if self.database is None else repr(self.database)
            registry = found.group(2) or (", registry=jobs.registry" if self.own_registry else "")
            return f"connect({url}{registry if url else registry.removeprefix(', ')})"

        return _CONNECT.sub(written, fix)

    def database_flag(self) -> tuple[str, str]:
        return (
            DATABASE_FLAG,
            URL_FROM_ENV if self.database is None else shell_word(self.database),
        )

    def flags(self) -> list[tuple[str, str]]:
        flags = [self.database_flag()]
        apps = self.apps()
        if apps:
            flags.append(("--app", shell_word(",".join(apps))))
        return flags

    def stored(self, value: T) -> T:
        """`value`, what a method answers, with the database written into the fix of each
        job's stored `last_error` it holds (a record, a page of them, a trace's job): read back
        through this client, a failed job's `mcp-jobs jobs show|retry ID` runs as given from
        any directory. Not `--app`: those lines need none, and a record is the stored row,
        which two clients of one database with other registries must answer alike."""
        flags = (self.database_flag(),)

        def written(record: JobRecord) -> JobRecord:
            error = record.last_error
            if error is None:
                return record
            fix = _with_flags_once(error.fix, flags)
            if fix == error.fix:
                return record
            return record.model_copy(update={"last_error": error.model_copy(update={"fix": fix})})

        if isinstance(value, JobRecord):
            return written(value)  # type: ignore[return-value]
        if isinstance(value, JobPage):
            jobs = [written(record) for record in value.jobs]
            changed = any(a is not b for a, b in zip(jobs, value.jobs, strict=True))
            return value.model_copy(update={"jobs": jobs}) if changed else value
        if isinstance(value, JobTrace):
            job = written(value.job)
            return value if job is value.job else value.model_copy(update={"job": job})
        return value

    def line(self, fix: str) -> str:
        """`fix` as an error leaving this client carries it: this context written in; and a
        `jobs describe` command, where no `--app` can be written (a script's `__main__`, a
        module found only beside it), the call on this client doing it: a shell's command
        would describe only what a worker published, this client describes its own jobs."""
        fix = self.connect_line(fix)
        flags = self.flags()
        if "--app" not in dict(flags):
            described = _describe_call(fix)
            if described is not None:
                return described
        return with_flags(fix, flags)

    def write_into(self, exc: BaseException) -> None:
        """Write this context into the fix of `exc` and of every engine error a group holds."""
        if isinstance(exc, BaseExceptionGroup):
            for inner in exc.exceptions:
                self.write_into(inner)
        elif isinstance(exc, JobsError):
            exc.fix = self.line(exc.fix)
            # A refused cursor's fix is its list's first page as a tool call (for the faces):
            # for a Python caller, the method's call.
            if isinstance(exc, CursorInvalidError) and exc.next_call is not None:
                exc.fix = first_page(exc.next_call) or exc.fix


@functools.lru_cache(maxsize=1024)
def _with_flags_once(fix: str, flags: tuple[tuple[str, str], ...]) -> str:
    """`with_flags`, once per line: a page of failed jobs often shares one fix."""
    return with_flags(fix, flags)


def as_raised(context: CommandContext | None, fix: str) -> str:
    """`fix` with the flags of a client with `context` written in, as its errors and its
    worker's log carry it (tests compare with it). An error leaving a method writes a `jobs
    describe` line with no `--app` as the call on the client instead (`CommandContext.line`);
    a worker's log, read in a shell where the worker published its jobs, keeps the line."""
    return fix if context is None else with_flags(fix, context.flags())


def _describe_call(fix: str) -> str | None:
    """The call on a client (`await jobs.describe("ship")`) doing what `fix` does when it is
    an `mcp-jobs jobs describe` command naming no database or app of its own, else None."""
    words = command_words(fix)
    if words is None:
        return None
    head = assignments_ahead(words)
    rest = words[head + 1 :]
    if head >= len(words) or words[head] != PROGRAM or rest[:2] != ["jobs", "describe"]:
        return None
    options = rest[: end_of_options(rest)]
    if any(w.split("=", 1)[0] in (DATABASE_FLAG, "--app") for w in options):
        return None
    return python_call(rest)


class WritesFixes(Protocol):
    """An object of the Python API whose errors leave with its `CommandContext` written in."""

    @property
    def fix_context(self) -> CommandContext | None: ...


S = TypeVar("S", bound=WritesFixes)
P = ParamSpec("P")
R = TypeVar("R")


# Set while a method of the Python API runs: a refusal is mended in the call its caller made,
# never in one the method made of its own (`select` pages through `list`).
_CALLING: ContextVar[bool] = ContextVar("python_api_call", default=False)


def mend_call(exc: BaseException, method: str, given: Sequence[Given]) -> None:
    """Where `exc` refuses an argument of the call `jobs.<method>(given)` and names the value
    nearest to it (INVALID_ARGUMENT's `nearest`, the id a JOB_NOT_FOUND's text holds, the job
    name a JOB_UNKNOWN's misspelt one plainly stands for), make
    its fix that call mended, when every argument of it is a short literal (`mended_call`);
    else its fix stays what it was (words saying what to pass)."""
    if type(exc) is InvalidArgumentError and exc.next_call is None:
        if exc.nearest is NOTHING_NEAR:
            return
        name, refused, nearest = exc.argument, exc.value, exc.nearest
    elif isinstance(exc, JobNotFoundError):
        held = exc.meant_id
        if held is None:
            return
        name, refused, nearest = "job_id", exc.job_id, held
    elif isinstance(exc, JobUnknownError) and "meant" in (details := exc.details or {}):
        # A misspelt job name, given as `job` (enqueue) or `name` (describe).
        refused, nearest = details["job"], details["meant"]
        named = [g.name for g in given if g.name in ("job", "name") and _alike(g.value, refused)]
        if not named:
            return
        name = named[0]
    else:
        return
    found = [g.value for g in given if g.name == name]
    if not found or not (found[0] is refused or _alike(found[0], refused)):
        return  # a value the method made, or an item of a list: not the caller's argument
    line = mended_call(method, given, {name: nearest})
    if line is not None:
        exc.fix = line
        if isinstance(exc, InvalidArgumentError):
            exc.fix_said = False


async def _begun_by(client: object, exc: JobNotFoundError) -> None:
    """Where the id refused is the start of one (an agent cut it short), the one job whose id
    begins so, in the tenant asked: a page of the ids just below the next prefix up, which
    every driver reads from its id order (newest first, after a cursor)."""
    prefix = exc.id_prefix
    driver = getattr(client, "driver", None)
    if prefix is None or not getattr(client, "is_jobs_client", False) or driver is None:
        return
    try:
        page = await driver.list_jobs(
            JobFilter(tenant_id=exc.tenant_id, cursor=prefix + "g", limit=2)
        )
    except JobsError:
        return  # the refusal stands as it is
    begun = [j.id for j in page.jobs if j.id.startswith(prefix)]
    begun += [d.id for d in page.damaged if d.id.startswith(prefix)]
    if len(begun) == 1:
        exc.begins(begun[0])


def _alike(a: object, b: object) -> bool:
    return type(a) is type(b) and a == b


def _bound(
    method: Callable[..., Any], self: object, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> dict[str, Any]:
    """The arguments of `method(self, *args, **kwargs)` by name (none when they do not bind)."""
    try:
        return dict(inspect.signature(method).bind(self, *args, **kwargs).arguments)
    except TypeError:
        return {}


def _leaving(
    self: WritesFixes,
    method: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    exc: BaseException,
    outermost: bool,
) -> None:
    """`exc` as it leaves `method` of the Python API: the object's `fix_context` written into
    its fix, and, where the caller made the call (`outermost`) on `jobs` itself, the call
    mended (`mend_call`) or written into the fix's template of it (`template_filled`)."""
    context = self.fix_context
    if context is None:
        return  # a face's client (no context) writes its own
    # Only a method of `jobs` itself is written as a call on it (a Worker's, a Backfills' keep
    # their fix).
    if outermost and getattr(self, "is_jobs_client", False):
        given = given_of(method, _bound(method, self, args, kwargs))
        if given is not None:
            mend_call(exc, method.__name__, given)
            if isinstance(exc, JobsError):
                exc.fix = template_filled(exc.fix, method.__name__, given)
    context.write_into(exc)


def fixes_written(
    method: Callable[Concatenate[S, P], Awaitable[R]],
) -> Callable[Concatenate[S, P], Coroutine[Any, Any, R]]:
    """`method`, whose engine errors leave with its object's `fix_context` written into their
    fix (where errors leave the Python API), as does each job's stored error it answers."""

    async def written(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
        outermost = not _CALLING.get()
        token = _CALLING.set(True)
        try:
            answer = await method(self, *args, **kwargs)
        except (JobsError, BaseExceptionGroup) as exc:
            if outermost and isinstance(exc, JobNotFoundError):
                await _begun_by(self, exc)
            _leaving(self, method, args, kwargs, exc, outermost)
            raise
        finally:
            _CALLING.reset(token)
        context = self.fix_context
        return answer if context is None else context.stored(answer)

    functools.update_wrapper(written, method)  # its name, docstring and signature
    return written


def leaf_fixes_written(
    method: Callable[Concatenate[S, P], Awaitable[R]],
) -> Callable[Concatenate[S, P], Coroutine[Any, Any, R]]:
    """`fixes_written` for a method that calls no other method of the Python API and answers
    no stored job (an enqueue, the per-job call): nothing is done on its way in or on a
    return, only as an error leaves it (is an outer call of the API running? `_CALLING`)."""

    async def written(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return await method(self, *args, **kwargs)
        except (JobsError, BaseExceptionGroup) as exc:
            _leaving(self, method, args, kwargs, exc, not _CALLING.get())
            raise

    functools.update_wrapper(written, method)
    return written


__all__ = [
    "DATABASE_FLAG",
    "END_OF_OPTIONS",
    "MEMORY_URL",
    "PRIVATE_STORE_LINE",
    "PROGRAM",
    "TAKES_CONTEXT",
    "CommandContext",
    "absent_flags",
    "absolute_url",
    "as_raised",
    "assignments_ahead",
    "command_words",
    "end_of_options",
    "fixes_written",
    "importable_anywhere",
    "is_name",
    "is_private",
    "leaf_fixes_written",
    "mend_call",
    "needs_on_path",
    "on_private_store",
    "spliced",
    "with_flags",
]
