"""Tool arguments, validated strictly for every tool in one place.

`make_strict` swaps each registered tool's argument model for a strict copy of itself: a JSON
boolean only for a boolean (never "yes", "true" or 1), a JSON number with no fraction only for an
integer (5 or 5.0, as JSON Schema counts them, never "5" or 5.5), no text parsed as a number or as
JSON, and no argument the tool does not declare.
A bound marked `ServerCap` is this server's limit rather than the argument's own range
(`strict_refusal`: LIMIT_EXCEEDED over it).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from mcp.server.mcpserver.tools.base import Tool
from mcp.server.mcpserver.utilities.func_metadata import FuncMetadata
from pydantic import ConfigDict

from mcp_jobs.server.argument_values import schema_kinds


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
        if "integer" in schema_kinds(schema) and "number" not in schema_kinds(schema)
    )


def _optional_not_null(parameters: Mapping[str, Any]) -> frozenset[str]:
    required = set(parameters.get("required", ()))
    return frozenset(
        name
        for name, schema in parameters.get("properties", {}).items()
        if name not in required and "null" not in schema_kinds(schema)
    )


def _whole(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value
