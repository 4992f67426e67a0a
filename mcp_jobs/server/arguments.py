"""Tool arguments, validated strictly for every tool in one place.

`make_strict` swaps each registered tool's argument model for a strict copy of itself: a JSON
boolean only for a boolean (never "yes", "true" or 1), a JSON integer only for an integer (never
"5" or 5.0), no text parsed as a number or as JSON, and no argument the tool does not declare.
`refusal` turns what the check found into the error an agent can act on: a range breach is
INVALID_ARGUMENT naming the argument and its range, or LIMIT_EXCEEDED when the bound is this
server's cap (marked `ServerCap`); anything else is TOOL_ARGUMENTS_INVALID, each entry saying
what the argument takes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from mcp.server.mcpserver.tools.base import Tool
from mcp.server.mcpserver.utilities.func_metadata import FuncMetadata
from pydantic import ConfigDict, ValidationError

from engine.errors import InvalidArgumentError, JobsError, short_repr
from mcp_jobs.errors import LimitExceededError, ToolArgumentsInvalidError, example_call

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
    string, and the strict model refuses it where a list or an object is declared."""

    def pre_parse_json(self, data: dict[str, Any]) -> dict[str, Any]:
        return data


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
            arg_model=strict,
            output_schema=meta.output_schema,
            output_model=meta.output_model,
            wrap_output=meta.wrap_output,
        )


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
    """The error for arguments the strict model refused."""
    props: dict[str, Any] = tool.parameters.get("properties", {})
    errors = exc.errors(include_url=False)
    breach = _range_breach(tool, arguments, errors, props)
    if breach is not None:
        return breach
    entries: list[dict[str, Any]] = []
    named: set[str] = set()
    for e in errors:
        name = str(e["loc"][0]) if e["loc"] else ""
        # One entry per argument: a union reports every member it tried, a list every item.
        if name in named:
            continue
        named.add(name)
        if e["type"] == "extra_forbidden":
            expected = f"no such argument: {tool.name} takes {', '.join(props) or 'none'}"
            msg = "unknown argument"
        else:
            expected = takes(props.get(name, {}))
            msg = e["msg"]
        entries.append(
            {
                "loc": list(e["loc"]),
                "msg": f"{msg}; {name} takes {expected}" if name else msg,
                "type": e["type"],
                "expected": expected,
            }
        )
    return ToolArgumentsInvalidError(tool.name, entries, _placeholder_call(tool.parameters))


def _range_breach(
    tool: Tool,
    arguments: Mapping[str, Any],
    errors: list[Any],
    props: Mapping[str, Any],
) -> JobsError | None:
    """INVALID_ARGUMENT or LIMIT_EXCEEDED when every error is a number out of its range."""
    if not errors or any(e["type"] not in _LOWER | _UPPER or len(e["loc"]) != 1 for e in errors):
        return None
    first = errors[0]
    name = str(first["loc"][0])
    value = first["input"]
    field = tool.fn_metadata.arg_model.model_fields.get(name)
    cap = next((m for m in field.metadata if isinstance(m, ServerCap)), None) if field else None
    if first["type"] in _UPPER and cap is not None:
        limit = next(iter(first["ctx"].values()))
        fix = f"{tool.name} {_call_at(tool, arguments, name, limit)}"
        return LimitExceededError(name, value, limit, cap.unit, fix)
    return InvalidArgumentError(name, value, takes(props.get(name, {})))


def _call_at(tool: Tool, arguments: Mapping[str, Any], name: str, value: Any) -> str:
    """The caller's own call with `name` set to `value`: what to send instead. An argument too
    long to echo is left out, or written as a placeholder when the tool requires it."""
    required = set(tool.parameters.get("required", []))
    call: dict[str, Any] = {}
    for key, given in arguments.items():
        if len(short_repr(given, _ECHO_CHARS + 1)) <= _ECHO_CHARS:
            call[key] = given
        elif key in required:
            call[key] = f"<{key}>"
    call[name] = int(value) if float(value).is_integer() else value
    return example_call(call)


def _placeholder(schema: Mapping[str, Any], name: str) -> Any:
    kinds = {s.get("type") for s in schema.get("anyOf", [schema])}
    if "object" in kinds:
        return {}
    if "boolean" in kinds:
        return True
    if kinds & {"integer", "number"}:
        return schema.get("minimum", 0)
    return f"<{name}>"


def _placeholder_call(input_schema: Mapping[str, Any]) -> str:
    """A call with every required argument filled by a placeholder of its type."""
    props: Mapping[str, Any] = input_schema.get("properties", {})
    required = input_schema.get("required", [])
    return example_call({n: _placeholder(props.get(n, {}), n) for n in required})
