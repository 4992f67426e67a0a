"""Tool arguments, validated strictly for every tool in one place.

`make_strict` swaps each registered tool's argument model for a strict copy of itself: a JSON
boolean only for a boolean (never "yes", "true" or 1), a JSON number with no fraction only for an
integer (5 or 5.0, as JSON Schema counts them, never "5" or 5.5), no text parsed as a number or as
JSON, and no argument the tool does not declare.
`refusal` turns what the check found into the error an agent can act on: a range breach is
INVALID_ARGUMENT naming the argument and its range, or LIMIT_EXCEEDED when the bound is this
server's cap (marked `ServerCap`); anything else is TOOL_ARGUMENTS_INVALID, each entry saying
what the argument takes.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, TypeVar

from mcp.server.mcpserver.tools.base import Tool
from mcp.server.mcpserver.utilities.func_metadata import FuncMetadata
from pydantic import ConfigDict, ValidationError

from engine.errors import (
    LEFT_OUT,
    NAMED,
    NOTHING_NEAR,
    InvalidArgumentError,
    JobNotFoundError,
    JobsError,
    id_within,
    short_repr,
)
from engine.meant import meant_as, meant_choices, same_words
from engine.retention import duration_text_ms
from mcp_jobs.errors import (
    ComputedKeyInvalidError,
    LimitExceededError,
    ToolArgumentsInvalidError,
    example_call,
)
from schemas.errors import NextCall

_LOWER = {"greater_than", "greater_than_equal"}
_UPPER = {"less_than", "less_than_equal"}
# An argument value longer than this (as JSON) is left out of a fix line, not echoed back.
_ECHO_CHARS = 200


@dataclass(frozen=True)
class ServerCap:
    """Marks a bound that is this server's limit (`Settings.limits`), not the argument's own
    range: going over it is LIMIT_EXCEEDED, with the same call at the cap as the fix."""

    unit: str


class StrictArguments(FuncMetadata):
    """The SDK's argument handling minus its one coercion: it parses a string argument as JSON
    when the parameter is not a str (`"[\\"failed\\"]"` became a list). Here a string stays a
    string, and the strict model refuses it where a list or an object is declared.

    An integer argument sent as 5.0 is taken as 5: the published schema's "integer" admits it
    (JSON Schema counts any number with no fraction), and a client that checks its call against
    that schema, or whose JSON library writes every number as a float, sends it so.

    A null for an optional argument that takes no null is the argument left out (its default):
    a client that turns each tool's schema into strict function calling (OpenAI's) sends every
    argument, the ones the model leaves unset as null. A required argument's null is refused."""

    whole_numbers: frozenset[str] = frozenset()
    null_as_absent: frozenset[str] = frozenset()

    def pre_parse_json(self, data: dict[str, Any]) -> dict[str, Any]:
        if not isinstance(data, dict):
            return data
        if None in data.values():
            data = {k: v for k, v in data.items() if v is not None or k not in self.null_as_absent}
        if not any(isinstance(data.get(name), float) for name in self.whole_numbers):
            return data
        return {name: _whole(v) if name in self.whole_numbers else v for name, v in data.items()}


def make_strict(tools: Iterable[Tool]) -> None:
    """Validate every tool's arguments strictly, unknown ones refused. Once, after the tools
    are registered; the published input schemas do not change (they already say the types)."""
    for tool in tools:
        meta = tool.fn_metadata
        if isinstance(meta, StrictArguments):
            continue
        model = meta.arg_model
        strict = type(
            model.__name__,
            (model,),
            {
                "model_config": ConfigDict(strict=True, extra="forbid"),
                "__module__": model.__module__,
            },
        )
        tool.fn_metadata = StrictArguments(
            whole_numbers=_integer_arguments(tool.parameters),
            null_as_absent=_optional_not_null(tool.parameters),
            arg_model=strict,
            output_schema=meta.output_schema,
            output_model=meta.output_model,
            wrap_output=meta.wrap_output,
        )


def _integer_arguments(parameters: Mapping[str, Any]) -> frozenset[str]:
    return frozenset(
        name
        for name, schema in parameters.get("properties", {}).items()
        if "integer" in _kinds(schema) and "number" not in _kinds(schema)
    )


def _optional_not_null(parameters: Mapping[str, Any]) -> frozenset[str]:
    required = set(parameters.get("required", ()))
    return frozenset(
        name
        for name, schema in parameters.get("properties", {}).items()
        if name not in required and "null" not in _kinds(schema)
    )


def _kinds(schema: Mapping[str, Any]) -> set[str]:
    """The JSON kinds an argument takes, over its union's members (`_member_kinds`)."""
    return {kind for variant in schema.get("anyOf", [schema]) for kind in _member_kinds(variant)}


def _whole(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def takes(schema: Mapping[str, Any]) -> str:
    """What a property's JSON schema accepts, in words: `a whole number from 1 to 200`."""
    variants = schema.get("anyOf")
    if variants:
        kinds = [takes(v) for v in variants if v.get("type") != "null"]
        nullable = len(kinds) < len(variants)
        return " or ".join(kinds) + (" (or null)" if nullable else "")
    if "enum" in schema:
        return "one of " + ", ".join(str(v) for v in schema["enum"])
    if "const" in schema:
        return repr(schema["const"])
    kind = schema.get("type")
    if kind == "boolean":
        return "true or false (a JSON boolean)"
    if kind in ("integer", "number"):
        word = "a whole number" if kind == "integer" else "a number"
        low, high = schema.get("minimum"), schema.get("maximum")
        if low is not None and high is not None:
            return f"{word} from {_number(low)} to {_number(high)}"
        if low is not None:
            return f"{word} ≥ {_number(low)}"
        return word
    if kind == "string" and schema.get("format") == "date-time":
        return "ISO 8601 text with its zone (2027-01-01T09:00:00Z)"
    if kind == "string":
        most = schema.get("maxLength")
        return "a string" + (f" of at most {most} characters" if most is not None else "")
    if kind == "array":
        return f"a list of {takes(schema.get('items', {}))}"
    if kind == "object":
        return "a JSON object"
    return "a JSON value"


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def refusal(tool: Tool, arguments: Mapping[str, Any], exc: ValidationError) -> JobsError:
    """The error for arguments the strict model refused. Its fix is the caller's own call
    mended where the mend is plain (a number at its range's nearest end, "5" as 5, JSON text
    as the value it spells), with a placeholder for anything else; `next_call` is that call
    when it needs no placeholder and the strict model accepts it, so it runs as given."""
    props: dict[str, Any] = tool.parameters.get("properties", {})
    errors = exc.errors(include_url=False)
    mended = _Mended(tool, arguments)
    fitting = _fitting_members(errors, props, arguments)
    breach = _range_breach(tool, fitting, props, mended)
    if breach is not None:
        return breach
    entries: list[dict[str, Any]] = []
    named: set[str] = set()
    # Each unknown argument that plainly stands for a declared one, moved there in the fix.
    required = tool.parameters.get("required", ())
    meant = {
        name: to
        for e in fitting
        if e["type"] == "extra_forbidden"
        and (to := meant_as(name := str(e["loc"][0]), props, given=arguments, required=required))
        is not None
    }
    # Two unknown arguments meant as one (`states` and `status`): which is plain is not.
    meant = {k: to for k, to in meant.items() if list(meant.values()).count(to) == 1}
    wrapper = _wrapper(fitting, props, arguments)
    for e in fitting:
        name = str(e["loc"][0]) if e["loc"] else ""
        # One entry per argument: a list reports every item.
        if name in named:
            continue
        named.add(name)
        if e["type"] == "extra_forbidden" and name == wrapper:
            inner = ", ".join(arguments[name])
            entry = {
                "msg": f"unknown argument, holding {tool.name}'s own ({inner}): the fix "
                "takes them out of it"
            }
            entry["expected"] = f"no such argument: {tool.name}'s arguments go at the top level"
            # Plainly the call wrapped once (`{"arguments": {...}}`): a read-only tool's
            # next_call runs it unwrapped; a write's is shown in the fix.
            mended.drop(name, guessed=not _reads_only(tool))
            for inner_name, value in arguments[name].items():
                mended.set(inner_name, _plainly(props[inner_name], value, inner_name))
        elif e["type"] == "extra_forbidden":
            listed = f"{tool.name} takes {', '.join(props) or 'none'}"
            hint = f" (meant as {meant[name]}?)" if name in meant else ""
            entry = {"msg": f"unknown argument{hint}; {listed}"}
            entry["expected"] = f"no such argument: {listed}"
            # A respelling (`tenantId`) is the argument itself: a read-only tool's next_call
            # runs it. Anything else moved is a guess, shown in the fix but not run.
            respelled = name in meant and same_words(name, meant[name])
            mended.drop(name, guessed=not (respelled and _reads_only(tool)))
            if name in meant:
                to = entry["meant"] = meant[name]
                mended.set(to, _plainly(props.get(to, {}), arguments[name], to))
            if arguments.get(_WRITE) is True and _WRITE in props and not respelled:
                # Dropped, it may have been the call's only narrowing (`job_ids` on
                # cancel_jobs), and moved, a guess: the call so mended, written, could reach
                # every job. The fix is its dry run, whose plan shows what it selects.
                mended.leave_out(_WRITE)
                entry["msg"] += f"; the fix leaves out {_WRITE} (a dry run of what it selects)"
        else:
            expected = takes(props.get(name, {}))
            entry = {"msg": f"{e['msg']}; {name} takes {expected}" if name else e["msg"]}
            entry["expected"] = expected
            if name and name not in meant.values():
                given = arguments.get(name, _MISSING)
                choice, guessed = _as_choices(props.get(name, {}), given)
                if name == _CONFIRM and _CONFIRM in props:
                    # `true` for the token: without it the write answers its plan and the
                    # token to confirm it with, writing nothing.
                    entry["msg"] += "; the fix leaves it out, which answers the token to pass"
                    mended.leave_out(name)
                elif choice is _MISSING:
                    mended.set(name, _as_intended(props.get(name, {}), given, seconds_of=name))
                elif guessed:
                    # A slip of the keys ("deda"): shown in the fix, not run, and a write so
                    # mended is its dry run, as for an argument moved by a guess.
                    entry["msg"] += f" (meant {json.dumps(choice)}?)"
                    mended.guess(name, choice)
                    if arguments.get(_WRITE) is True and _WRITE in props:
                        mended.leave_out(_WRITE)
                else:
                    mended.set(name, choice)
        entries.append({"loc": list(e["loc"]), "type": e["type"], **entry})
    mended.settle()
    return ToolArgumentsInvalidError(tool.name, entries, mended.text(), next_call=mended.call())


_MISSING = object()
# The argument of a tool that writes only when it is true (the bulk tools, run_backfill,
# prune_history); left out, the call is a dry run.
_WRITE = "write"
# The argument of a write that carries the token its confirmation issued (mcp_jobs/server/
# confirm.py); a write sent without it answers that token.
_CONFIRM = "confirm"
# The suffix of an argument in seconds, which a duration ("7d") plainly means.
_SECONDS = "_seconds"


def _plainly(schema: Mapping[str, Any], value: Any, name: str) -> Any:
    """`value` as `schema` plainly takes it ("Dead" as "dead", "5" as 5), or as given."""
    choice, guessed = _as_choices(schema, value)
    if choice is not _MISSING and not guessed:
        return choice
    intended = _as_intended(schema, value, seconds_of=name)
    return value if intended is _MISSING else intended


def _wrapper(
    errors: list[Any], props: Mapping[str, Any], arguments: Mapping[str, Any]
) -> str | None:
    """The one unknown argument whose value is an object of this tool's own arguments, none of
    them also given beside it (`list_jobs {"arguments": {"state": "dead"}}`): the call wrapped."""
    unknown = [str(e["loc"][0]) for e in errors if e["type"] == "extra_forbidden" and e["loc"]]
    found = [
        name
        for name in dict.fromkeys(unknown)
        if isinstance(value := arguments.get(name), dict)
        and value
        and all(k in props and k not in arguments for k in value)
    ]
    return found[0] if len(found) == 1 else None


def _reads_only(tool: Tool) -> bool:
    return tool.annotations is not None and tool.annotations.read_only_hint is True


def _fitting_members(
    errors: list[Any], props: Mapping[str, Any], arguments: Mapping[str, Any]
) -> list[Any]:
    """The errors with each union argument's (`"a" | list["a"]`, `int | str`) narrowed to the
    members the value's JSON kind fits (a list's: which item is wrong; -5's: the integer's
    range), and the member's name (pydantic's `constrained-int`) left out of the place it names,
    so a number out of its range reads as one. A value no member's kind fits keeps every error.
    """
    members: dict[str, list[Any]] = {}
    for e in errors:
        loc = e["loc"]
        name = str(loc[0]) if loc else ""
        choices = [m for m in props.get(name, {}).get("anyOf", ()) if m.get("type") != "null"]
        if len(choices) > 1 and len(loc) > 1 and isinstance(loc[1], str):
            members.setdefault(name, []).append(e)
    out: list[Any] = []
    shown: set[str] = set()
    for e in errors:
        name = str(e["loc"][0]) if e["loc"] else ""
        tried = members.get(name)
        if tried is None:
            out.append(e)
        elif name not in shown:
            shown.add(name)
            fits = _of_kind(tried, props[name]["anyOf"], arguments.get(name, _MISSING)) or tried
            out.extend({**t, "loc": (t["loc"][0], *t["loc"][2:])} for t in fits)
    return out


def _of_kind(tried: list[Any], choices: list[Any], value: Any) -> list[Any]:
    """The errors of the union members whose JSON kind `value` has. pydantic reports its
    members in the order the schema lists them (`anyOf`, null apart), so the n-th member
    named among the errors is the n-th choice."""
    schemas = [c for c in choices if c.get("type") != "null"]
    order = list(dict.fromkeys(str(t["loc"][1]) for t in tried))
    if len(order) != len(schemas):
        return []
    kinds = _json_kinds(value)
    kind_of = {member: _member_kinds(schemas[i]) for i, member in enumerate(order)}
    return [t for t in tried if kind_of[str(t["loc"][1])] & kinds]


def _member_kinds(schema: Mapping[str, Any]) -> set[str]:
    """The JSON kinds one schema (a union's member) takes: its type, or its values' (an enum
    published without its type)."""
    if "type" in schema:
        return {schema["type"]}
    values = schema.get("enum", [schema["const"]] if "const" in schema else [])
    return {kind for v in values for kind in _json_kinds(v)}


def _json_kinds(value: Any) -> set[str]:
    """The JSON Schema types a JSON value is an instance of."""
    if isinstance(value, bool):
        return {"boolean"}
    if isinstance(value, int):
        return {"integer", "number"}
    if isinstance(value, float):
        return {"number", "integer"} if value.is_integer() else {"number"}
    for kind, name in ((str, "string"), (list, "array"), (dict, "object")):
        if isinstance(value, kind):
            return {name}
    return set()


# The tool call under way, for an INVALID_ARGUMENT the engine raises while the tool runs.
_CALL: ContextVar[tuple[Tool, Mapping[str, Any]] | None] = ContextVar("tool_call", default=None)


@contextmanager
def calling(tool: Tool, arguments: Mapping[str, Any]) -> Iterator[None]:
    """Mark `tool` called with `arguments` while the block runs (see `mended`)."""
    token = _CALL.set((tool, arguments))
    try:
        yield
    finally:
        _CALL.reset(token)


def mended(exc: BaseException) -> BaseException:
    """`exc`, or, when it is the engine refusing an argument of the tool call under way as the
    caller gave it, the same refusal whose fix is that call mended: the value the engine named
    nearest to it (a range's end that moves with the clock, the key the job computes), or a
    "<name>" slot; the id a text holds (JOB_NOT_FOUND), the name meant (JOB_UNKNOWN,
    QUEUE_UNKNOWN), an input's fields renamed (JOB_INPUT_INVALID), a "<tenant_id>" slot
    (JOB_TENANT_REQUIRED), the input with slots for the fields a computed key is too long for;
    with next_call when the mended call runs as given."""
    current = _CALL.get()
    if current is None or not isinstance(exc, JobsError):
        return exc
    tool, arguments = current
    if isinstance(exc, JobNotFoundError):
        return _id_held(exc, tool, arguments)
    if exc.code in NAMED:
        return _name_meant(exc, tool, arguments)
    if exc.code == "JOB_INPUT_INVALID":
        return _fields_meant(exc, tool, arguments)
    if exc.code == "JOB_TENANT_REQUIRED":
        return _slotted(exc, tool, arguments, "tenant_id", _MISSING)
    if isinstance(exc, ComputedKeyInvalidError) and exc.slotted is not None:
        return _slotted(exc, tool, arguments, "input", exc.slotted)
    if exc.__class__ not in (InvalidArgumentError, LimitExceededError):
        return exc
    assert isinstance(exc, InvalidArgumentError | LimitExceededError)
    if exc.next_call is not None:
        return exc
    if isinstance(exc, LimitExceededError):
        return _within_limit(exc, tool, arguments)
    name, given = exc.argument, arguments.get(exc.argument, _MISSING)
    mend = _Mended(tool, arguments)
    if exc.nearest is LEFT_OUT and given is not _MISSING:
        mend.leave_out(name)  # whatever its value: the call has no use for it
    elif exc.nearest is NOTHING_NEAR and _holds(given, exc.value):
        # An item no stored thing can match (a queue name with a NUL) selects nothing: the
        # list without it asks the same.
        kept = [item for item in given if not _same(item, exc.value)]
        if kept:
            mend.set(name, kept)
        else:
            mend.leave_out(name)
    elif _same(given, exc.value):
        mend.set(name, _MISSING if exc.nearest is NOTHING_NEAR else exc.nearest)
    # The engine named the value by what is wrong with it ("nested deeper than 64 levels at
    # $.a…", "2000000 bytes of JSON"), or in other units: a slot, never its nearest value.
    elif exc.nearest is NOTHING_NEAR and given is not _MISSING:
        mend.set(name, _MISSING)
    else:
        return exc
    mend.settle()
    return InvalidArgumentError(
        name,
        # As the caller wrote it: 5, not the 5.0 a float argument made of it.
        given if given is not _MISSING and given == exc.value else exc.value,
        exc.expected,
        fix=f"{tool.name} {mend.text()}",
        next_call=mend.call(),
    )


E = TypeVar("E", bound=JobsError)


def _as_mended(exc: E, tool: Tool, mend: _Mended) -> E:
    """`exc` whose fix is the call `mend` holds, and its next_call when that runs as given."""
    mend.settle()
    exc.fix, exc.next_call = f"{tool.name} {mend.text()}", mend.call()
    return exc


def _name_meant(exc: JobsError, tool: Tool, arguments: Mapping[str, Any]) -> JobsError:
    """JOB_UNKNOWN or QUEUE_UNKNOWN for a name that plainly stands for a known one (its
    `meant`) as the caller's call with that name: with next_call when it is the name in another
    spelling (`Bench_Noop`) on a read-only tool; a slip of the keys, or a write, shown only."""
    details = exc.details or {}
    given, meant = details.get(NAMED[exc.code]), details.get("meant")
    places = [
        (name, value)
        for name, value in arguments.items()
        if value == given or (isinstance(value, list) and value.count(given) == 1)
    ]
    if meant is None or not isinstance(given, str) or len(places) != 1:
        return exc
    name, value = places[0]
    mend = _Mended(tool, arguments)
    named = [meant if item == given else item for item in value] if value != given else meant
    if same_words(given, meant) and _reads_only(tool):
        mend.set(name, named)
    else:
        mend.guess(name, named)
    if not same_words(given, meant) and arguments.get(_WRITE) is True:
        # A slip of the keys is a guess: the write so mended is its dry run (a plan), as on
        # the CLI, where such a line loses --yes.
        mend.leave_out(_WRITE)
    return _as_mended(exc, tool, mend)


def _slotted(exc: E, tool: Tool, arguments: Mapping[str, Any], name: str, value: Any) -> E:
    """`exc` as the caller's own call with `name` for them to fill in: a "<name>" slot
    (`_MISSING`: the tenant a tenant_required job runs for), or `value` holding slots (the
    input with the fields a computed key is too long for). Shown in the fix, never run."""
    if name not in tool.parameters.get("properties", {}):
        return exc
    mend = _Mended(tool, arguments)
    if value is _MISSING:
        mend.set(name, value)
    else:
        mend.fill(name, value)
    return _as_mended(exc, tool, mend)


def _fields_meant(exc: JobsError, tool: Tool, arguments: Mapping[str, Any]) -> JobsError:
    """JOB_INPUT_INVALID whose every error is a field given under a name that plainly stands
    for a declared one (`userId` for `user_id`: the unknown one and the missing one) as the
    call with those fields renamed. A write: shown in the fix, not run."""
    given = arguments.get("input")
    errors = (exc.details or {}).get("errors", [])
    meant = {e["loc"][0]: e["meant"] for e in errors if e.get("meant") and len(e["loc"]) == 1}
    explained = {*meant, *meant.values()}
    if (
        not isinstance(given, dict)
        or not meant
        or any(len(e["loc"]) != 1 or e["loc"][0] not in explained for e in errors)
    ):
        return exc
    mend = _Mended(tool, arguments)
    mend.guess("input", {meant.get(name, name): value for name, value in given.items()})
    return _as_mended(exc, tool, mend)


def _id_held(exc: JobNotFoundError, tool: Tool, arguments: Mapping[str, Any]) -> JobsError:
    """JOB_NOT_FOUND for text that holds one job id (`" 01a2…"`, `"job 01a2…"`, capitals) as
    the caller's call with that id: it is plainly the id meant, and the call runs as given."""
    inner = id_within(exc.job_id)
    names = [name for name, value in arguments.items() if value == exc.job_id]
    if inner is None or len(names) != 1:
        return exc
    mend = _Mended(tool, arguments)
    mend.set(names[0], inner)
    return _as_mended(exc, tool, mend)


def _within_limit(exc: LimitExceededError, tool: Tool, arguments: Mapping[str, Any]) -> JobsError:
    """A server cap only the tool's body checks (an input's bytes), as the caller's own call
    with the argument at the cap when it is a number, else a "<name>" slot."""
    given = arguments.get(exc.argument, _MISSING)
    if given is _MISSING:
        return exc
    mend = _Mended(tool, arguments)
    number = isinstance(given, int | float) and not isinstance(given, bool)
    mend.set(exc.argument, exc.limit if number else _MISSING)
    mend.settle()
    fix = f"{tool.name} {mend.text()}"
    return LimitExceededError(
        exc.argument, exc.value, exc.limit, exc.unit, fix, next_call=mend.call(), why=exc.why
    )


def _same(given: Any, value: object) -> bool:
    return type(given) is type(value) and given == value


def _holds(given: Any, value: object) -> bool:
    """Whether the caller's list `given` holds the refused `value` as one of its items."""
    return isinstance(given, list) and any(_same(item, value) for item in given)


class _Mended:
    """The caller's call, mended one argument at a time, for a refusal's fix and next_call."""

    def __init__(self, tool: Tool, arguments: Mapping[str, Any]) -> None:
        self.tool = tool
        self.props: Mapping[str, Any] = tool.parameters.get("properties", {})
        self.arguments = dict(arguments)
        self.mended: set[str] = set()
        self.placeholders = False
        self.guessed = False
        self.valid = False

    def set(self, name: str, value: Any) -> None:
        """`value` for `name`; _MISSING puts a slot there, "<name>", that no tool takes as
        given (a value of the argument's kind, such as `true` for `write`, would run)."""
        if value is _MISSING:
            value = f"<{name}>"
            self.placeholders = True
        self.arguments[name] = value
        self.mended.add(name)

    def fill(self, name: str, value: Any) -> None:
        """`value` for `name`, holding "<…>" slots the caller fills in: shown in the fix,
        never offered to run."""
        self.set(name, value)
        self.placeholders = True

    def drop(self, name: str, guessed: bool = True) -> None:
        """`name` taken out (an unknown argument); `guessed`: what it meant is not plain, so
        the mended call is not offered to run."""
        self.arguments.pop(name, None)
        self.guessed = self.guessed or guessed

    def guess(self, name: str, value: Any) -> None:
        """`value` for `name`, what the caller's plainly stood for only by a guess: shown in
        the fix, never offered to run."""
        self.set(name, value)
        self.guessed = True

    def leave_out(self, name: str) -> None:
        """`name` taken out of a call that asks the same without it (`LEFT_OUT`)."""
        self.arguments.pop(name, None)

    def settle(self) -> None:
        """Check the mended call: a mended number still out of range goes to its range's
        nearest end, and any other mended value still refused becomes a placeholder."""
        for _ in range(2):
            try:
                meta = self.tool.fn_metadata
                meta.arg_model.model_validate(meta.pre_parse_json(self.arguments))
            except ValidationError as exc:
                errors = exc.errors(include_url=False)
                for e in _fitting_members(errors, self.props, self.arguments):
                    name = str(e["loc"][0]) if e["loc"] else ""
                    if name not in self.mended:
                        continue
                    ranged = e["type"] in _LOWER | _UPPER and len(e["loc"]) == 1
                    self.set(name, _nearest(e) if ranged else _MISSING)
            else:
                self.valid = True
                return

    def _shown(self) -> dict[str, Any]:
        # An argument too long to echo is left out, or a placeholder when the tool requires it.
        required = self.tool.parameters.get("required", [])
        shown: dict[str, Any] = {}
        for name, given in self.arguments.items():
            if len(short_repr(given, _ECHO_CHARS + 1)) <= _ECHO_CHARS:
                shown[name] = given
            elif name in required:
                shown[name] = _placeholder(self.props.get(name, {}), name)
        for name in required:
            if name not in shown:
                shown[name] = _placeholder(self.props.get(name, {}), name)
        order = {name: i for i, name in enumerate(self.props)}
        return dict(sorted(shown.items(), key=lambda item: order.get(item[0], len(order))))

    def text(self) -> str:
        return example_call(self._shown())

    def call(self) -> NextCall | None:
        """The mended call, when it runs as given and means what the caller asked: the strict
        model takes it, and nothing in it is a placeholder, a guess, left out or dropped (an unknown
        argument may have been meant as another)."""
        shown = self._shown()
        if not self.valid or self.placeholders or self.guessed or shown != self.arguments:
            return None
        return NextCall(tool=self.tool.name, arguments=shown)


def _as_intended(schema: Mapping[str, Any], value: Any, *, seconds_of: str = "") -> Any:
    """`value` as the value of a kind `schema` takes that it plainly means ("5" for an integer,
    "true" for a boolean, JSON text of a list or an object, and for an argument in seconds
    (`seconds_of` names it: `*_seconds`) a duration as the CLI and settings write it, "7d"; a
    list of one where one value is taken, and one value where a list of its kind is), else
    _MISSING."""
    kinds = _kinds(schema)
    if isinstance(value, list) and len(value) == 1 and "array" not in kinds:
        return value[0] if _json_kinds(value[0]) & kinds else _MISSING
    if not isinstance(value, str):
        return _MISSING
    if kinds & {"integer", "number"}:
        try:
            number = float(value)
        except ValueError:
            number = _seconds_in(value) if seconds_of.endswith(_SECONDS) else math.nan
        if number.is_integer():
            return int(number)
        if "number" in kinds and math.isfinite(number):
            return number
    if "boolean" in kinds and value.lower() in ("true", "false"):
        return value.lower() == "true"
    if kinds & {"array", "object"}:
        try:
            parsed = json.loads(value)
        except ValueError:
            parsed = _MISSING
        if isinstance(parsed, list) and "array" in kinds:
            return parsed
        if isinstance(parsed, dict) and "object" in kinds:
            return parsed
        if parsed is _MISSING and "string" not in kinds and _takes_text_items(schema):
            return [value]
    return _MISSING


def object_in_text(value: Any) -> dict[str, Any] | None:
    """The JSON object `value` plainly means when it is JSON text of one (`"{}"`), as an object
    argument is mended; else None."""
    found = _as_intended({"type": "object"}, value)
    return found if isinstance(found, dict) else None


def _takes_text_items(schema: Mapping[str, Any]) -> bool:
    """Whether `schema` takes a list of free text (`queues`), which one text plainly starts."""
    return any(
        member.get("type") == "array" and member.get("items", {}).get("type") == "string"
        for member in schema.get("anyOf", [schema])
    )


def _as_choices(schema: Mapping[str, Any], value: Any) -> tuple[Any, bool]:
    """`value` as the choice, or list of choices, of an argument of named values that it
    stands for: a value in another case ("Dead"), one value where a list is taken ("failed"),
    text with commas ("failed,dead"); and whether a piece was only a slip of the keys ("deda",
    a guess). (_MISSING, False) when a piece stands for none."""
    singles: list[str] = []
    items: list[str] = []
    for member in schema.get("anyOf", [schema]):
        singles += [v for v in member.get("enum", ()) if isinstance(v, str)]
        if member.get("type") == "array":
            items += [v for v in member.get("items", {}).get("enum", ()) if isinstance(v, str)]
    if isinstance(value, str) and value.lstrip().startswith(("[", "{")):
        return _MISSING, False  # JSON text: `_as_intended` reads it
    if isinstance(value, str):
        pieces = value.split(",")
    elif isinstance(value, list) and all(isinstance(v, str) for v in value):
        pieces = list(value)
    else:
        return _MISSING, False
    found = meant_choices(pieces, list(dict.fromkeys(singles + items)))
    if found is None:
        return _MISSING, False
    chosen, guessed = found
    if isinstance(value, str) and len(chosen) == 1 and chosen[0] in singles:
        return chosen[0], guessed
    if items and all(c in items for c in chosen):
        return chosen, guessed
    return _MISSING, False


def _seconds_in(text: str) -> float:
    """The seconds a duration ("90s", "30m", "7d") spells, NaN for anything else."""
    ms = duration_text_ms(text)
    return math.nan if ms is None else ms / 1000


def _range_breach(
    tool: Tool,
    errors: list[Any],
    props: Mapping[str, Any],
    mended: _Mended,
) -> JobsError | None:
    """INVALID_ARGUMENT or LIMIT_EXCEEDED when every error is a number out of its range; the
    fix is the call with each such number at its range's nearest end."""
    if not errors or any(e["type"] not in _LOWER | _UPPER or len(e["loc"]) != 1 for e in errors):
        return None
    for e in errors:
        mended.set(str(e["loc"][0]), _nearest(e))
    mended.settle()
    fix = f"{tool.name} {mended.text()}"
    call = mended.call()
    first = errors[0]
    name = str(first["loc"][0])
    value = first["input"]
    field = tool.fn_metadata.arg_model.model_fields.get(name)
    cap = next((m for m in field.metadata if isinstance(m, ServerCap)), None) if field else None
    if first["type"] in _UPPER and cap is not None:
        limit = next(iter(first["ctx"].values()))
        return LimitExceededError(name, value, limit, cap.unit, fix, next_call=call)
    return InvalidArgumentError(name, value, takes(props.get(name, {})), fix=fix, next_call=call)


def _nearest(error: Mapping[str, Any]) -> Any:
    """The value nearest to a refused one that its bound admits: the bound itself when
    inclusive, the next whole number past it for an integer; _MISSING for a number that has
    no nearest (past an exclusive bound of a float)."""
    bound = next(iter(error["ctx"].values()))
    if error["type"] in ("greater_than_equal", "less_than_equal"):
        return int(bound) if float(bound).is_integer() else bound
    if isinstance(error["input"], int) and float(bound).is_integer():
        return int(bound) + (1 if error["type"] == "greater_than" else -1)
    return _MISSING


def _placeholder(schema: Mapping[str, Any], name: str) -> Any:
    variants = schema.get("anyOf", [schema])
    kinds = _kinds(schema)
    if "object" in kinds:
        return {}
    if "boolean" in kinds:
        return True
    if kinds & {"integer", "number"}:
        numeric = next(s for s in variants if s.get("type") in ("integer", "number"))
        return numeric.get("minimum", 0)
    return f"<{name}>"
