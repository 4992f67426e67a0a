"""The call on a client that does what an `mcp-jobs` command does (`await jobs.list(...)`).

A `memory://` store lives inside the client's process: a shell's `--database-url memory://`
opens a new, empty one, so a fix line there is this call instead (engine/fix_lines.py).
"""

from __future__ import annotations

import inspect
import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from engine.command_line import DATABASE_FLAG, end_of_options
from engine.errors import LEFT_OUT
from engine.redaction import scrubbed
from schemas.errors import NextCall

# The name a Python caller's client has in a fix line, as in the README and the docstrings.
CLIENT = "jobs"
# What a command's option gives its call: a text, a whole number, True (a bare flag), texts that
# follow it (`--queues a b`), a text each time it is given (`--state a --state b`), JSON.
_Kind = Literal["text", "int", "flag", "texts", "each", "json"]
# The context's options (`CommandContext.flags`, the faces' FixContext) a call has already: the
# client is the database, its registry the app. `--tenant`, the scope, is its `tenant_id=`.
_CONTEXT_OPTIONS: dict[str, _Kind] = {
    "--json": "flag",
    DATABASE_FLAG: "text",
    "--app": "text",
    "--tenant": "text",
}


@dataclass(frozen=True)
class _Call:
    """The `Jobs` method doing what one `mcp-jobs` command does, and how its words map onto it."""

    method: str
    # The method's parameters the command's positionals give, in order; how many it needs.
    positionals: tuple[str, ...] = ()
    needed: int = 0
    # Each option of the command: the parameter it gives, and how.
    options: dict[str, tuple[str, _Kind]] = field(default_factory=dict)
    # The method's parameters passed by position, in order (the rest by keyword).
    by_position: tuple[str, ...] = ()
    # Whether it takes `tenant_id` (the scope `--tenant` pins).
    scoped: bool = False


_CALLS: dict[tuple[str, str], _Call] = {
    ("jobs", "ls"): _Call(
        "list",
        options={
            "--state": ("state", "each"),
            "--name": ("name", "text"),
            "--queue": ("queue", "text"),
            "--tenant-id": ("tenant_id", "text"),
            "--limit": ("limit", "int"),
            "--cursor": ("cursor", "text"),
        },
        scoped=True,
    ),
    ("jobs", "show"): _Call(
        "trace", ("job_id",), 1, {"--run-id": ("run_id", "text")}, ("job_id", "run_id"), True
    ),
    ("jobs", "retry"): _Call(
        "retry",
        ("job_id",),
        1,
        {
            "--include-cancelled": ("include_cancelled", "flag"),
            "--from-step": ("from_step", "text"),
        },
        ("job_id",),
        True,
    ),
    ("jobs", "cancel"): _Call("cancel", ("job_id",), 1, by_position=("job_id",), scoped=True),
    ("jobs", "describe"): _Call("describe", ("name",), by_position=("name",)),
    ("jobs", "stats"): _Call(
        "stats", options={"--queues": ("queues", "texts")}, by_position=("queues",), scoped=True
    ),
    ("queues", "ls"): _Call("pauses"),
    ("queues", "pause"): _Call(
        "pause", ("queue",), options={"--job": ("job", "text"), "--reason": ("reason", "text")}
    ),
    ("queues", "resume"): _Call("resume", ("queue",), options={"--job": ("job", "text")}),
    ("events", "send"): _Call(
        "send_event",
        ("name", "key"),
        2,
        {"--payload": ("payload", "json")},
        ("name", "key", "payload"),
        True,
    ),
    ("db", "migrate"): _Call("migrate"),
}


def python_call(rest: Sequence[str]) -> str | None:
    """The call on a client (`await jobs.list(state="dead")`) that does what `mcp-jobs <rest>`
    does (its context options aside: the client is its database and app), or None when no call
    does (`db report`, a worker) or `rest` gives it something no call takes."""
    if rest and rest[0] == "backfill":
        return _backfills_call(rest[1:])
    call = _CALLS.get((rest[0], rest[1])) if len(rest) >= 2 else None
    if call is None:
        return None
    try:
        given = _arguments(call, rest[2:])
        # `jobs show ID --run-id R`: that run's steps.
        method = "run_steps" if call.method == "trace" and "run_id" in given else call.method
        shown: list[str] = []
        for name in call.by_position:
            if name not in given:
                break
            shown.append(python_literal(given.pop(name)))
        shown += [f"{name}={python_literal(value)}" for name, value in given.items()]
    except ValueError:
        return None
    return f"await {CLIENT}.{method}({', '.join(shown)})"


def _backfills_call(words: Sequence[str]) -> str | None:
    """The call listing the declared backfills that `mcp-jobs backfill [--pending]` makes (its
    context options aside), else None: a name rehearses or writes one, which no fix line does."""
    # Not `--tenant`: a backfill spans every tenant, and the CLI refuses a pinned one.
    options = {**_CONTEXT_OPTIONS, "--pending": "flag"}
    del options["--tenant"]
    given: set[str] = set()
    at = 0
    while at < len(words):
        flag, inline, _ = words[at].partition("=")
        if flag not in options:
            return None  # a name, or an option no listing takes
        given.add(flag)
        at += 1 if inline or options[flag] == "flag" else 2
    pending = "pending_only=True" if "--pending" in given else ""
    return f"await Backfills({CLIENT}).list({pending})"


def _arguments(call: _Call, words: Sequence[str]) -> dict[str, Any]:
    """The parameters `words` (a command's, past its subcommand) give `call`, in the order
    the method takes them; ValueError for a word it has no place for."""
    options = {**{flag: (flag, kind) for flag, kind in _CONTEXT_OPTIONS.items()}, **call.options}
    given: dict[str, Any] = {}
    positionals: list[str] = []
    ended = end_of_options(words)
    at = 0
    while at < ended:
        word = words[at]
        at += 1
        if not word.startswith("-"):
            positionals.append(word)
            continue
        flag, inline, value = word.partition("=")
        if flag not in options:
            raise ValueError(word)
        name, kind = options[flag]
        if kind == "flag":
            if inline:
                raise ValueError(word)
            given[name] = True
            continue
        if kind == "texts":
            values = [value] if inline else []
            while at < ended and not words[at].startswith("-"):
                values.append(words[at])
                at += 1
            if not values:
                raise ValueError(word)
            given[name] = [*given.get(name, []), *values]
            continue
        if not inline:
            if at >= ended:
                raise ValueError(word)
            value, at = words[at], at + 1
        given[name] = [*given.get(name, []), value] if kind == "each" else _typed(value, kind)
    positionals += words[ended + 1 :]
    if not call.needed <= len(positionals) <= len(call.positionals):
        raise ValueError(positionals)
    tenant = given.pop("--tenant", None)
    for context in _CONTEXT_OPTIONS:
        given.pop(context, None)
    ordered = dict(zip(call.positionals, positionals, strict=False))
    for name in (*call.positionals, *(n for n, _ in call.options.values())):
        if name in given:
            ordered[name] = given[name]
    for name, kind in call.options.values():
        if kind == "each" and len(ordered.get(name, ())) == 1:
            ordered[name] = ordered[name][0]  # one given: the value, not a list of it
    if tenant is not None:
        if not call.scoped or ordered.get("tenant_id", tenant) != tenant:
            raise ValueError(tenant)
        ordered["tenant_id"] = tenant
    return ordered


def _typed(value: str, kind: _Kind) -> Any:
    if kind == "int":
        return int(value)
    if kind == "json":
        parsed = json.loads(value)
        if parsed is None:  # the CLI refuses `null`: no payload is left out, not null
            raise ValueError(value)
        return parsed
    return value


def python_literal(value: Any) -> str:
    """`value` (text, a number, True, JSON) as the Python literal that reads back as it."""
    if isinstance(value, str):
        # A printable text in double quotes, as the README's calls are; any other in repr's
        # escapes (a newline would split the line, a lone surrogate is no UTF-8).
        return json.dumps(value, ensure_ascii=False) if value.isprintable() else repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(python_literal(v) for v in value) + "]"
    if isinstance(value, dict):
        pairs = (f"{python_literal(k)}: {python_literal(v)}" for k, v in value.items())
        return "{" + ", ".join(pairs) + "}"
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(value)  # no literal reads back as it (the CLI refuses it anyway)
    return repr(value)


def first_page(call: NextCall) -> str | None:
    """The Python line asking for the first page the tool call `call` (a CURSOR_INVALID's fix,
    its cursor left out) asks for, or None for a tool no method here pages."""
    arguments = dict(call.arguments)
    words: list[str] = []
    if call.tool == "inspect_job" and "job_id" in arguments:
        method = f"{CLIENT}.trace"
        words.append(python_literal(arguments.pop("job_id")))
    elif call.tool == "list_backfills" and "name" in arguments:
        method = f"Backfills({CLIENT}).runs_page"
        words.append(python_literal(arguments.pop("name")))
    elif call.tool == "list_jobs":
        method = f"{CLIENT}.list"
    else:
        return None
    words += [f"{key}={python_literal(value)}" for key, value in arguments.items()]
    return f"await {method}({', '.join(words)})"


# A mended call longer than this stays prose: a fix is one line a reader takes in.
MENDED_CALL_LIMIT = 300
# Names of an input's fields whose value a fix never repeats (engine.drivers.urls'
# MASKED_PARAMS, and the usual spellings of a secret).
_SECRET_NAMES = ("password", "passwd", "secret", "token", "credential", "api_key", "apikey")


@dataclass(frozen=True)
class Given:
    """One argument of a call as its caller gave it: by position or by keyword."""

    name: str
    value: Any
    by_position: bool


def mended_call(method: str, given: Sequence[Given], changed: Mapping[str, Any]) -> str | None:
    """`await jobs.<method>(...)`: the call as `given`, each argument named in `changed` set to
    its value there (`LEFT_OUT`: left out), or None when it cannot be written to run as given:
    an argument with no literal that reads back as it (a model, a datetime), a credential in
    one, or a line longer than MENDED_CALL_LIMIT."""
    words = _argument_list(given, changed)
    line = None if words is None else f"await {CLIENT}.{method}({words})"
    if line is None or len(line) > MENDED_CALL_LIMIT or scrubbed(line) != line:
        return None
    return line


# A fix's code template of the call being made: `jobs.stage(conn, name, input)`.
_TEMPLATE = re.compile(rf"{CLIENT}\.(\w+)\(((?:[\w.]+, )?)name, input\)")


def template_filled(fix: str, method: str, given: Sequence[Given]) -> str:
    """`fix` with its template of a `jobs.<method>(...)` call (`name, input` for the caller's
    values, after the transaction a stage takes) written as the call `given` was, where every
    value of it has a literal (`mended_call`'s rule); else `fix` as it was."""
    found = _TEMPLATE.search(fix)
    if found is None or found.group(1) != method:
        return fix
    words = _argument_list([g for g in given if g.name != "tx"], {})
    if words is None:
        return fix
    filled = f"{CLIENT}.{method}({found.group(2)}{words})"
    if len(filled) > MENDED_CALL_LIMIT or scrubbed(filled) != filled:
        return fix
    return fix[: found.start()] + filled + fix[found.end() :]


def _argument_list(given: Sequence[Given], changed: Mapping[str, Any]) -> str | None:
    """The argument list of a call as `given`, with `changed` (see `mended_call`)."""
    words: list[str] = []
    by_keyword = False  # once one is, every later argument is (or one left out shifts them)
    try:
        for argument in given:
            value = changed.get(argument.name, argument.value)
            if value is LEFT_OUT:
                by_keyword = True
                continue
            literal = _literal(value)
            by_keyword = by_keyword or not argument.by_position
            words.append(f"{argument.name}={literal}" if by_keyword else literal)
    except ValueError:
        return None
    return ", ".join(words)


def _literal(value: Any) -> str:
    """`python_literal` of a value of JSON's kinds only (exactly: no subclass, whose repr is no
    literal); ValueError for any other, or a dict holding a field named as a secret."""
    kind = type(value)
    if value is None or kind in (bool, int, float, str):
        return python_literal(value)
    if kind in (list, tuple):
        return "[" + ", ".join(_literal(v) for v in value) + "]"
    if kind is dict and all(type(k) is str for k in value):
        if any(secret in k.lower() for k in value for secret in _SECRET_NAMES):
            raise ValueError(value)
        return "{" + ", ".join(f"{_literal(k)}: {_literal(v)}" for k, v in value.items()) + "}"
    raise ValueError(value)


def given_of(function: Callable[..., Any], arguments: Mapping[str, Any]) -> list[Given] | None:
    """The arguments of a call of `function` (a method: its `self` left out) as `arguments`
    gives them, in its order, each left at its default left out; None when it takes `*args` or
    `**kwargs` (no call can be rewritten from their names)."""
    out: list[Given] = []
    for parameter in list(inspect.signature(function).parameters.values())[1:]:
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            return None
        if parameter.name not in arguments:
            continue
        value, default = arguments[parameter.name], parameter.default
        if value is default or (type(value) is type(default) and value == default):
            continue
        by_position = parameter.kind in (parameter.POSITIONAL_ONLY, parameter.POSITIONAL_OR_KEYWORD)
        out.append(Given(parameter.name, value, by_position))
    return out
