"""What `tools/list` publishes: each tool's schemas compacted, since every session pays for them
in context (tests/mcp/test_lean_surface.py measures them on the wire).

The output schemas accept exactly what the tools answer. A success is dumped without its None
fields (`envelope.success`), so an optional field is absent, never null: `anyOf [T, null]` becomes
T and the field leaves `required`. What an output schema keeps: every property with its type,
enums, `required` on the envelope (`ok`) and on the error (what an agent branches on), one
`$defs` entry per record a tool uses twice (a record used once is inlined). What goes: titles,
defaults, descriptions (the tool's description says what it answers), the `required` lists of
records (their fields are all listed), the ISO 8601 twin `*_iso` of each epoch-ms time (the
server's instructions say every time has one), the `type` of a nested node with `properties`
or `items` (they say object or array), and the `View` suffix of a definition's name
(`ErrorPayload` is `Error`).

An input schema keeps its descriptions and defaults (an agent fills those in); titles and the
`null` branch of an optional argument go.

A read-only tool's idempotent and destructive hints go: MCP reads them only on a writing tool.

A node that constrains nothing (an `Any` field: a job's output, a backfill cursor) becomes a
reference to `Json`, the six JSON types, so a strict client sees a type everywhere.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from mcp.types import Tool

Schema = dict[str, Any]

# Keys that hold a map of name -> schema, a list of schemas, or one schema.
_MAPS = ("properties", "$defs", "patternProperties")
_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SINGLE = ("items", "additionalProperties", "not", "contains", "propertyNames")
# What no client acts on in an output schema.
_OUTPUT_NOISE = ("title", "default", "readOnly", "examples", "description")
# Any of these makes a schema node say what its value is (`properties`: an object, `items`: an
# array, which is why a node below the top that has them is published without its `type`).
TYPED = ("type", "$ref", "anyOf", "oneOf", "allOf", "const", "enum", "properties", "items")
# The error keeps its `required` list: code, cause and fix are what an agent branches on.
ERROR_DEF = "ErrorPayload"

ISO_SUFFIX = "_iso"
JSON_DEF = "Json"
JSON_SCHEMA: Schema = {
    "anyOf": [{"type": t} for t in ("object", "array", "string", "number", "boolean", "null")]
}


def _map_children(node: Schema, fn: Callable[[Schema, str | None], Schema]) -> Schema:
    """`node` with `fn` applied to each direct subschema (told the property's name, if any)."""
    out = dict(node)
    for key in _MAPS:
        if isinstance(node.get(key), dict):
            named = key == "properties"
            out[key] = {name: fn(sub, name if named else None) for name, sub in node[key].items()}
    for key in _LISTS:
        if isinstance(node.get(key), list):
            out[key] = [fn(sub, None) for sub in node[key]]
    for key in _SINGLE:
        if isinstance(node.get(key), dict):
            out[key] = fn(node[key], None)
    return out


def _without_null(node: Schema) -> Schema | None:
    """The non-null branch of `anyOf [T, null]` (annotations kept), or None if `node` is not one."""
    branches = node.get("anyOf")
    if not isinstance(branches, list) or len(branches) != 2 or {"type": "null"} not in branches:
        return None
    (kept,) = [b for b in branches if b != {"type": "null"}]
    return {**{k: v for k, v in node.items() if k != "anyOf"}, **kept}


def _set_required(node: Schema, required: list[str]) -> Schema:
    out = {k: v for k, v in node.items() if k != "required"}
    return {**out, "required": required} if required else out


def _absent_not_null(node: Schema) -> Schema:
    """An object whose nullable fields become optional ones, as `success` sends them."""
    props = node.get("properties")
    if not isinstance(props, dict):
        return node
    required = list(node.get("required", []))
    fields: dict[str, Schema] = {}
    for name, sub in props.items():
        stripped = _without_null(sub)
        if stripped is not None:
            sub = stripped
            required = [r for r in required if r != name]
        fields[name] = sub
    return _set_required({**node, "properties": fields}, required)


def _without_iso_twins(node: Schema) -> Schema:
    """An object without its `*_iso` twins: the server's instructions name them once, while a
    validating client checks every property a schema lists in every answer."""
    props = node.get("properties")
    if not isinstance(props, dict):
        return node
    twins = {n for n, sub in props.items() if n.endswith(ISO_SUFFIX) and sub == {"type": "string"}}
    if not twins:
        return node
    out = {**node, "properties": {n: sub for n, sub in props.items() if n not in twins}}
    return _set_required(out, [r for r in node.get("required", []) if r not in twins])


def _clean_output(node: Schema, *, keep_required: bool, nulls: bool) -> Schema:
    """`node` and its subschemas (cleaned first: the steps below read them) without noise."""

    def child(sub: Schema, name: str | None) -> Schema:
        return _clean_output(sub, keep_required=False, nulls=nulls)

    node = _map_children({k: v for k, v in node.items() if k not in _OUTPUT_NOISE}, child)
    if node.get("additionalProperties") is True:
        del node["additionalProperties"]
    if "enum" in node and node.get("type") == "string":
        del node["type"]  # the enum's values say it
    if not nulls:
        node = _absent_not_null(node)
    node = _without_iso_twins(node)
    if not keep_required:
        node.pop("required", None)
    if not any(key in node for key in TYPED):
        node = {**node, "$ref": f"#/$defs/{JSON_DEF}"}
    return node


def _count_refs(node: Any, counts: dict[str, int]) -> None:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            name = ref.removeprefix("#/$defs/")
            counts[name] = counts.get(name, 0) + 1
        for value in node.values():
            _count_refs(value, counts)
    elif isinstance(node, list):
        for value in node:
            _count_refs(value, counts)


def _inline(node: Any, defs: dict[str, Schema], once: set[str]) -> Any:
    """`node` with each reference to a definition in `once` replaced by the definition."""
    if isinstance(node, list):
        return [_inline(v, defs, once) for v in node]
    if not isinstance(node, dict):
        return node
    name = str(node.get("$ref", "")).removeprefix("#/$defs/")
    if name in once:
        rest = {k: v for k, v in node.items() if k != "$ref"}
        return _inline({**defs[name], **rest}, defs, once)
    return {k: _inline(v, defs, once) for k, v in node.items()}


def _short(name: str) -> str:
    """A definition's published name: `ErrorPayload` is `Error`, a `…View` its record's name."""
    return "Error" if name == ERROR_DEF else name.removesuffix("View")


def _renamed(node: Any, names: dict[str, str]) -> Any:
    if isinstance(node, list):
        return [_renamed(v, names) for v in node]
    if not isinstance(node, dict):
        return node
    out = {k: _renamed(v, names) for k, v in node.items()}
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.removeprefix("#/$defs/") in names:
        out["$ref"] = f"#/$defs/{names[ref.removeprefix('#/$defs/')]}"
    return out


def _implied_types(node: Any, *, top: bool = True) -> Any:
    """`node` without the `type` that its `properties` (object) or `items` (array) imply, below
    the top (MCP wants `"type": "object"` there). Such a node still constrains its value, and
    validates the same answers."""
    if isinstance(node, list):
        return [_implied_types(v, top=False) for v in node]
    if not isinstance(node, dict):
        return node
    out = {
        k: v if k in ("enum", "const", "required") else _implied_types(v, top=False)
        for k, v in node.items()
    }
    implied = {"object": "properties", "array": "items"}.get(str(out.get("type")))
    if not top and implied in out:
        del out["type"]
    return out


def compact_output(schema: Schema) -> Schema:
    """A tool's output schema, compacted: the same answers validate, at a third of the bytes."""
    defs = {
        name: _clean_output(sub, keep_required=name == ERROR_DEF, nulls=False)
        for name, sub in schema.get("$defs", {}).items()
    }
    defs[JSON_DEF] = JSON_SCHEMA
    top = {k: v for k, v in schema.items() if k != "$defs"}
    top = _clean_output(top, keep_required=True, nulls=False)
    counts: dict[str, int] = {}
    _count_refs([top, defs], counts)
    # A definition that refers to itself is never inlined (it could not end).
    once = {
        name
        for name, n in counts.items()
        if n == 1 and name in defs and f'"#/$defs/{name}"' not in json.dumps(defs[name])
    }
    kept = {
        n: _inline(sub, defs, once) for n, sub in defs.items() if counts.get(n) and n not in once
    }
    top = _inline(top, defs, once)
    names = {n: _short(n) for n in kept if _short(n) not in kept}
    top = {**top, "$defs": {names.get(n, n): sub for n, sub in kept.items()}} if kept else top
    published: Schema = _implied_types(_renamed(top, names))
    return published


def _clean_input(node: Schema, *, optional: bool = False) -> Schema:
    node = {k: v for k, v in node.items() if k != "title"}
    if node.get("default", 0) is None:
        del node["default"]
    if optional and isinstance(node.get("anyOf"), list) and {"type": "null"} in node["anyOf"]:
        # An optional argument is omitted, not sent as null: its types alone are published.
        branches = [b for b in node["anyOf"] if b != {"type": "null"}]
        node = {k: v for k, v in node.items() if k != "anyOf"}
        node = {**node, **branches[0]} if len(branches) == 1 else {**node, "anyOf": branches}
    if "enum" in node and node.get("type") == "string":
        del node["type"]  # the enum's values say it
    needed = set(node.get("required", []))

    def child(sub: Schema, name: str | None) -> Schema:
        return _clean_input(sub, optional=name is not None and name not in needed)

    return _map_children(node, child)


def compact_input(schema: Schema) -> Schema:
    """A tool's input schema without titles and `null` noise; descriptions and defaults stay."""
    return _clean_input(schema)


def published(tool: Tool) -> Tool:
    """The tool as `tools/list` shows it: schemas compacted, and unknown arguments published as
    refused, since they are (a misspelt `include_cancelled` must not be silently dropped)."""
    output = tool.output_schema
    hints = tool.annotations
    if hints is not None and hints.read_only_hint:
        # MCP gives the idempotent and destructive hints meaning only when readOnlyHint is false.
        hints = hints.model_copy(update={"idempotent_hint": None, "destructive_hint": None})
    return tool.model_copy(
        update={
            "input_schema": {**compact_input(tool.input_schema), "additionalProperties": False},
            "output_schema": compact_output(output) if output is not None else None,
            "annotations": hints,
        }
    )
