"""The ONE rule that makes a fix line run as given: the effective context written into it.

A fix such as `mcp-jobs worker --queues orders` is only right in the process that wrote it: run
from another directory it opens another database (a relative SQLite URL, or the default one),
imports no app, sweeps another shop (`SHOP_DB`), acts in another environment. `FixContext` holds
what this process runs with — the database URL made absolute, the `--app` modules, a
non-default `MCP_JOBS_ENV`, a pinned tenant, the environment variables the app declared
(`engine.environment.uses_environment`) and, when an app imports only because the working
directory or the inherited `PYTHONPATH` (given inline, `PYTHONPATH=/x mcp-jobs …`) is on
`sys.path`, `PYTHONPATH`; on a line that prunes, the retention settings (`prune_context`) —
and `qualify` writes it into any fix that is an `mcp-jobs …` or `python …` command: assignments
in front, flags appended when absent. A tool call
(`inspect_job {"job_id": …}`) or an instruction is left as it is. For an MCP client, a command
that a tool does too (`db report`) becomes that tool's call, with its `next_call`.

A database password is never written: the URL loses it, and the command then takes it from
`PGPASSWORD` or `~/.pgpass` (libpq's own sources, which asyncpg reads too).

An MCP caller that holds an OAuth access token is a third party the issuer vouched for, likely
on another machine (`is_remote`): it is not handed the operator's connection details. Its lines
name the database as `"$MCP_JOBS_DATABASE_URL"` and carry none of this process's paths (app
environment, `PYTHONPATH`, the programs' full paths); the `next_call` beside a line is what it
runs. A caller pinned to one tenant is offered no call to a tool that spans every tenant
(`SPANS_TENANTS`): it would be refused.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from enum import Enum
from functools import cache
from pathlib import Path
from types import UnionType
from typing import TYPE_CHECKING, Any, Literal, TypeVar, Union, get_args, get_origin

from pydantic import BaseModel

from engine.drivers.urls import URL_FROM_ENV
from engine.environment import EnvironmentUse, declared_environment
from engine.fix_lines import (
    PROGRAM,
    TAKES_CONTEXT,
    absent_flags,
    absolute_url,
    assignments_ahead,
    command_words,
    end_of_options,
    needs_on_path,
    spliced,
)
from engine.shell_words import shell_join, shell_word
from mcp_jobs.config import DEFAULT_ENVIRONMENT, ENVIRONMENT_ENV, Settings
from mcp_jobs.prune_context import reads_retention, retention_settings
from mcp_jobs.tool_commands import (
    TOOL_FOR_COMMAND,
    command_of_call,
    dash_safe,
    tool_call_of,
)
from schemas.errors import NextCall

if TYPE_CHECKING:
    from engine.client import Jobs

Face = Literal["mcp", "cli"]

# Which subcommands take the context flags, and how they are appended, is the engine's rule
# (engine/fix_lines.py), which an error raised through the Python API is written with too.
# Only the `jobs` commands and `events send` act within a tenant; a backfill or a pause
# (`queues`) spans every tenant (a pinned one is refused) and a worker serves them all.
TAKES_TENANT = frozenset({"jobs", "events"})
# The tools that act on every tenant's data, which a caller pinned to one is refused
# (TENANT_SCOPE_EXCEEDED): never its next_call.
SPANS_TENANTS = frozenset({"run_backfill", "database_report", "pause_queue", "resume_queue"})
PYTHONS = frozenset({"python", "python3", sys.executable})
# FixContext.listing's commands, by command group and argument ("*": any group).
_LISTING: dict[tuple[str, str], tuple[str, ...]] = {
    ("*", "job_id"): ("jobs", "ls"),
    ("*", "queue"): ("jobs", "stats"),
    ("*", "queues"): ("jobs", "stats"),
    ("jobs", "name"): ("jobs", "describe"),
    ("queues", "job"): ("jobs", "describe"),
    ("backfill", "name"): ("backfill",),
}
# Written where the app module is unknown: the one case a fix line cannot be complete.
APP_PLACEHOLDER = "<module>"

M = TypeVar("M", bound=BaseModel)


def written_by_face(jobs: Jobs) -> Jobs:
    """`jobs`, whose errors' fix lines a face writes its whole context into (`FixContext`):
    the engine's part (`Jobs.fix_context`: its database and registry's modules), written first,
    would stand in place of the face's own and change what the face prints, so it is off."""
    jobs.fix_context = None
    return jobs


@cache  # one search of PATH per process: a fix is written on many calls
def unreachable_programs(path: str | None) -> tuple[tuple[str, str], ...]:
    """The programs a fix names (`mcp-jobs`, `python`) whose name, on the shell search `path`,
    is not this installation's, each with the full path that is: an MCP client often starts
    the server by its full path, from a virtualenv the agent's shell has not activated."""
    here = Path(sys.executable).parent
    named = [(PROGRAM, here / PROGRAM), ("python", Path(sys.executable))]
    named.append(("python3", Path(sys.executable)))
    out: list[tuple[str, str]] = []
    for word, ours in named:
        found = shutil.which(word, path=path)
        # The directory, not the resolved file: a venv's python links to the base interpreter.
        if found is not None and Path(os.path.abspath(found)).parent == here:
            continue
        if ours.is_file():
            out.append((word, str(ours)))
    return tuple(out)


def pythonpath_for(apps: Sequence[str], cwd: Path, inherited: str | None) -> str | None:
    """The `PYTHONPATH` a fix line needs for `apps` to import from any directory, or None when
    each imports without it: when one imports only from `cwd` or an inherited entry (given
    inline, `PYTHONPATH=/x mcp-jobs …`, a shell elsewhere lacks it), the inherited one with each
    entry absolute, behind `cwd` when an app is found there and no entry names it."""
    here = str(cwd.resolve())
    entries = [os.path.abspath(os.path.join(here, e)) for e in (inherited or "").split(os.pathsep)]
    entries = entries if inherited else []
    if not any(needs_on_path(app, [here, *entries]) for app in apps):
        return None
    named = any(os.path.realpath(e) == os.path.realpath(here) for e in entries)
    if not named and any(needs_on_path(app, [here]) for app in apps):
        entries.insert(0, here)
    return os.pathsep.join(entries)


def is_remote(settings: Settings, face: Face) -> bool:
    """Whether an answer goes to a third party, not to the operator of this process: an MCP
    caller of a server that takes OAuth access tokens (every such caller holds one)."""
    return face == "mcp" and settings.oauth is not None


def needs_cwd_on_path(module: str, cwd: Path) -> bool:
    """True when `module` imports only because `cwd` (or "") is on `sys.path`: another
    directory then needs PYTHONPATH (`needs_on_path`)."""
    return needs_on_path(module, [str(cwd)])


@dataclass(frozen=True)
class FixContext:
    """What a command needs to act on what this process acts on (see the module docstring)."""

    database_url: str | None = None
    # The database's URL carries a secret: a command names it by the environment variable.
    url_secret: bool = False
    apps: tuple[str, ...] = ()
    tenant: str | None = None
    # `NAME=value` assignments written in front of a command, in order.
    assignments: tuple[tuple[str, str], ...] = ()
    # The retention settings written in front of a command that prunes by them (prune_context).
    retention: tuple[tuple[str, str], ...] = ()
    face: Face = "mcp"
    # Tools the caller cannot call (a read-only server's, an OAuth grant's): a fix is never
    # made into a call to one, and a next_call naming one is left out.
    unserved: frozenset[str] = frozenset()
    # (name, full path) of each program a fix names that the shell would not find as ours.
    programs: tuple[tuple[str, str], ...] = ()
    # Set by `worker` alone: a worker line this process starts has no app without `APP_PLACEHOLDER`.
    app_placeholder: bool = False

    @classmethod
    def of(
        cls,
        settings: Settings,
        *,
        face: Face = "mcp",
        cwd: Path | None = None,
        environ: Mapping[str, str] | None = None,
        declared: Sequence[EnvironmentUse] | None = None,
        unserved: frozenset[str] = frozenset(),
        remote: bool | None = None,
    ) -> FixContext:
        """The context of `settings` run from `cwd` (default: this process's) with `environ`,
        and the app environment `declared` (default: what the imported apps declared).
        `remote`: whether the reader is a token holder (None: `is_remote`; a page served to
        one, written as commands, says so itself)."""
        cwd = Path.cwd() if cwd is None else cwd
        environ = os.environ if environ is None else environ
        remote = is_remote(settings, face) if remote is None else remote
        assignments: list[tuple[str, str]] = []
        for use in declared_environment() if declared is None else declared:
            value = use.effective(environ, cwd)
            if value is not None and not remote:
                assignments.append((use.name, value))
        if settings.environment != DEFAULT_ENVIRONMENT:
            assignments.append((ENVIRONMENT_ENV, settings.environment))
        pythonpath = pythonpath_for(settings.apps, cwd, environ.get("PYTHONPATH"))
        if pythonpath is not None and not remote:
            assignments.append(("PYTHONPATH", pythonpath))
        url = absolute_url(settings.url, cwd)
        if remote and not (url or "").lower().startswith("memory:"):
            url = None  # named by its variable, as a URL with a secret is
        if settings.tenant is not None:
            unserved = unserved | SPANS_TENANTS
        return cls(
            database_url=url,
            url_secret=url is None,
            apps=settings.apps,
            tenant=settings.tenant,
            assignments=tuple(assignments),
            retention=retention_settings(environ),
            face=face,
            unserved=unserved,
            programs=() if remote else unreachable_programs(environ.get("PATH")),
        )

    @property
    def private_store(self) -> bool:
        """Whether the database lives inside this process (`memory://`): no worker or command
        started elsewhere can reach it, so a line that starts one must not be handed out."""
        return (self.database_url or "").lower().startswith("memory:")

    def listing(self, group: str, argument: str) -> str | None:
        """The command that lists what `argument` of a `group` command names (a queue, a job
        id, a job or backfill name), or None: the fix of a name no such thing can have (empty,
        a NUL, too long), as of a name that names nothing, is what there is to name."""
        words = _LISTING.get((group, argument)) or _LISTING.get(("*", argument))
        return None if words is None else self.command(*words, "--json")

    def command(self, *words: str) -> str:
        """`mcp-jobs <words>` with this context: the way to write a new fix line. A name in
        `words` that starts with `-` stays a name (`dash_safe`)."""
        return self.qualify(shell_join([PROGRAM, *dash_safe(words)]))

    def worker(self, *words: str) -> str:
        """`command` for a worker this process asks for where none runs (`worker` first in
        `words`): with no app known, `--app <module>` marks the one part the line cannot name.
        A worker line as typed goes through `command`: it ran without --app and runs so again."""
        return replace(self, app_placeholder=not self.apps).command(*words)

    def qualify(self, fix: str) -> str:
        """`fix` with this context written in when it is an `mcp-jobs` or `python` command;
        unchanged otherwise. Applying it twice changes nothing the second time."""
        return self.rewrite(fix)[0]

    def rewrite(self, fix: str, held: NextCall | None = None) -> tuple[str, NextCall | None]:
        """`qualify`'s answer, and the tool call the fix became for an MCP client (a command a
        tool does too, unless a tenant is pinned: such a tool spans every tenant), else None.
        On a `memory://` server a command becomes that tool's call, else `held` (the call the
        error or finding offers beside it), else words (`PRIVATE_STORE_LINE`)."""
        if self.face == "cli":
            command = self.cli_command(fix)
            if command is not None:
                return command, None
        words = command_words(fix)
        if words is None:  # unbalanced quotes, a pipeline or a list: not one command to extend
            return fix, None
        head = assignments_ahead(words)
        assigned = {w.split("=", 1)[0] for w in words[:head]}
        if head >= len(words):
            return fix, None
        named, rest = words[head], words[head + 1 :]
        # Past a `--` every word is a name (`dash_safe`): the context flags go before it.
        ended = end_of_options(rest)
        program = next((name for name, path in self.programs if path == named), named)
        private = program == PROGRAM and self.face == "mcp" and self.on_private_store(rest)
        if private:
            instead = self.private_call(rest, held)
            if instead is not None:
                return instead
        elif program == PROGRAM and self.face == "mcp" and self.tenant is None:
            same = TOOL_FOR_COMMAND.get(tuple(rest[:2]))
            if same is not None and same[0] not in self.unserved:
                tool, arguments = same
                return f"{tool} {json.dumps(arguments)}", NextCall(tool=tool, arguments=arguments)
        if program == PROGRAM:
            suffix = self._flags(rest[:ended])
        elif program in PYTHONS:
            suffix = []
        else:
            return fix, None
        carried = [*self.assignments]
        if program == PROGRAM and reads_retention(rest):
            carried += self.retention
        prefix = [f"{n}={shell_word(v)}" for n, v in carried if n not in assigned]
        line = " ".join(
            [*prefix, spliced(fix, words, head, suffix, lambda text: self._reachable(text, named))]
        )
        # No tool does what it does: the line, in words that say why it cannot run here.
        return (PRIVATE_STORE_LINE.format(line=line) if private else line), None

    def on_private_store(self, rest: Sequence[str]) -> bool:
        """Whether `mcp-jobs <rest>` would act on a `memory://` server's store: a shell's
        `--database-url memory://` opens a new, empty one, never the server's (`serve` starts
        a server of its own, which is what its line says)."""
        return self.private_store and bool(rest) and rest[0] in TAKES_CONTEXT and rest[0] != "serve"

    def private_call(
        self, rest: Sequence[str], held: NextCall | None
    ) -> tuple[str, NextCall | None] | None:
        """For an MCP client, what runs instead of `mcp-jobs <rest>` on a `memory://` store: the
        tool call doing the same (`tool_call_of`), else `held` (the call the error or finding
        offers beside the line), else None."""
        call = tool_call_of(tuple(rest))
        if call is not None and self._offered(call[0]):
            tool, arguments = call
            return f"{tool} {json.dumps(arguments)}", NextCall(tool=tool, arguments=arguments)
        if held is not None and self._offered(held.tool):
            return f"{held.tool} {json.dumps(held.arguments)}", None
        return None

    def _offered(self, tool: str) -> bool:
        """Whether a fix may be a call to `tool`: the caller can call it, and a pinned tenant's
        caller would not be refused it (`SPANS_TENANTS`)."""
        return tool not in self.unserved and not (self.tenant is not None and tool in SPANS_TENANTS)

    def _reachable(self, fix: str, program: str) -> str:
        """`fix` with its program, named as the shell would not find ours, as its path."""
        path = dict(self.programs).get(program)
        if path is None:
            return fix
        return re.sub(
            rf"(^|\s){re.escape(program)}(?=\s|$)", lambda m: m[1] + shell_word(path), fix, count=1
        )

    def cli_command(self, fix: str) -> str | None:
        """The `mcp-jobs` command that makes the tool call `fix` (`list_jobs {"limit": 200}`),
        or None when `fix` is no such call or the CLI has no way to give one of its arguments."""
        tool, _, given = fix.partition(" ")
        words = command_of_call(tool, given)
        return None if words is None else self.command(*words, "--json")

    def _flags(self, rest: Sequence[str]) -> list[str]:
        subcommand = rest[0] if rest else ""
        flags: list[tuple[str, str]] = []
        if self.database_url is not None:
            flags.append(("--database-url", shell_word(self.database_url)))
        elif self.url_secret:
            flags.append(("--database-url", URL_FROM_ENV))
        if self.apps:
            flags.append(("--app", shell_word(",".join(self.apps))))
        elif self.app_placeholder and subcommand == "worker":
            flags.append(("--app", APP_PLACEHOLDER))
        if self.tenant is not None and subcommand in TAKES_TENANT:
            flags.append(("--tenant", shell_word(self.tenant)))
        return absent_flags(rest, flags)

    def qualify_all(self, model: M) -> M:
        """`model` with the fix of every error payload and finding inside it qualified, and of
        every error an event's data carries (`{"code": …, "fix": …}`). A job's own input,
        output and step results are never touched: they are the app's data."""
        return _qualified(model, self)  # type: ignore[no-any-return]


# The fix where a worker is needed and the database is `memory://` (`private_store`).
PRIVATE_STORE_FIX = (
    "memory:// lives inside this one process and cannot be shared with a worker: restart the "
    "server and the worker on one SQLite file or PostgreSQL URL (--database-url "
    "sqlite:///ABSOLUTE/PATH/jobs.db)"
)
# The fix where a command would act on a `memory://` server's store (`on_private_store`): no
# command started elsewhere reaches it, and no tool does what the command does.
PRIVATE_STORE_LINE = (
    "this server's memory:// store lives inside its process and no command reaches it ({line} "
    "would open a new, empty one): restart the server and the command on one SQLite file or "
    "PostgreSQL URL (--database-url sqlite:///ABSOLUTE/PATH/jobs.db)"
)


# Fields that hold the app's own JSON, where a "fix" key is the app's and not ours.
APP_DATA = frozenset({"input", "output", "result"})


_SCALARS = (str, int, float, bool, type(None))


def _may_hold_fix(annotation: Any) -> bool:
    """Whether a field typed `annotation` can hold an error payload or stored JSON (a model, a
    mapping, a list, anything untyped); a scalar, literal or enum cannot."""
    if annotation in _SCALARS or get_origin(annotation) is Literal:
        return False
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return False
    if get_origin(annotation) in (Union, UnionType):
        return any(_may_hold_fix(arg) for arg in get_args(annotation))
    return True


@cache
def _fields_to_visit(model: type[BaseModel]) -> tuple[str, ...]:
    """The fields of `model` that `_qualified` looks into: a list page of records visits two
    fields a row (the last error, the progress) instead of every field."""
    return tuple(
        name
        for name, field in model.model_fields.items()
        if name not in APP_DATA and (name == "fix" or _may_hold_fix(field.annotation))
    )


def _qualified(value: Any, ctx: FixContext) -> Any:
    if isinstance(value, BaseModel):
        update: dict[str, Any] = {}
        for name in _fields_to_visit(type(value)):
            current = getattr(value, name)
            if name == "fix" and isinstance(current, str):
                held = getattr(value, "next_call", None)
                new, call = ctx.rewrite(current, held if isinstance(held, NextCall) else None)
                if "next_call" in type(value).model_fields:
                    if held is None and call is not None:
                        update["next_call"] = call
                    elif isinstance(held, NextCall) and held.tool in ctx.unserved:
                        update["next_call"] = None
            else:
                new = _qualified(current, ctx)
            if new is not current:
                update[name] = new
        return value.model_copy(update=update) if update else value
    if isinstance(value, dict):
        # Stored JSON the engine wrote (an event's data): an error in it is code + fix.
        error_shaped = isinstance(value.get("fix"), str) and isinstance(value.get("code"), str)
        out = {
            k: ctx.qualify(v)
            if k == "fix" and error_shaped
            else v
            if k in APP_DATA
            else _qualified(v, ctx)
            for k, v in value.items()
        }
        return out if any(out[k] is not value[k] for k in value) else value
    if isinstance(value, list):
        items = [_qualified(v, ctx) for v in value]
        return items if any(a is not b for a, b in zip(items, value, strict=True)) else value
    return value


__all__ = [
    "APP_PLACEHOLDER",
    "PRIVATE_STORE_FIX",
    "PRIVATE_STORE_LINE",
    "PROGRAM",
    "SPANS_TENANTS",
    "Face",
    "FixContext",
    "absolute_url",
    "is_remote",
    "needs_cwd_on_path",
    "written_by_face",
]
