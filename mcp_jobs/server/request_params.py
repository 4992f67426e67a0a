"""A request whose params have the wrong shape, refused by name on every transport.

The SDK checks a spec method's params (tools/call, prompts/get, resources/read,
completion/complete, …) before any handler runs and answered each miss -32602 "Invalid request
parameters" with empty data: no word of which field, or what it must be. This server
middleware answers the same -32602 with the typed payload every other refusal carries (code,
cause, fix; `details.argument` the field), and for `arguments` sent as JSON text of an object
(a common agent slip) the fix is the request with the object itself, as a tool mends such an
argument (`server.argument_values.object_in_text`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS
from pydantic import ValidationError
from pydantic_core import ErrorDetails

from engine.errors import InvalidArgumentError
from mcp_jobs.server.argument_values import object_in_text

# What a field of each of pydantic's error types must be, in JSON's words.
_EXPECTED = {
    "dict_type": "a JSON object",
    "model_type": "a JSON object",
    "model_attributes_type": "a JSON object",
    "string_type": "a string",
    "int_type": "an integer",
    "bool_type": "a boolean",
    "list_type": "a JSON array",
}
# The request that lists what a method's `name` or `uri` may be.
_LISTING = {
    "tools/call": "tools/list",
    "prompts/get": "prompts/list",
    "resources/read": "resources/list",
}
# A fix holding the mended params is given up to this size; beyond it, said in words.
MAX_FIX_CHARS = 2_000


async def named_params(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    """`Server.middleware`: the SDK's refusal of a request's params, named (module docstring)."""
    try:
        return await call_next(ctx)
    except ValidationError as exc:
        refused = params_refusal(ctx.method, ctx.params, exc)
        if refused is None:
            raise
        raise refused from None


def params_refusal(method: str, params: Any, exc: ValidationError) -> MCPError | None:
    """The -32602 naming the field of `params` that `exc` (the SDK's check of a `method`
    request's params) refuses; None when `exc` is not about the params as sent."""
    errors = exc.errors(include_url=False, include_context=False)
    if not errors or any(e["loc"][:1] != ("params",) for e in errors):
        return None  # a handler's own model, not the request's params
    path, group = _worst(errors)
    argument = ".".join(["params", *path])
    expected = " or ".join(dict.fromkeys(_expected(e) for e in group))
    given = group[0]["input"] if group[0]["type"] != "missing" else None
    refused = InvalidArgumentError(argument, given, expected)
    refused.cause = f"{method}: {refused.cause}"
    refused.fix = f"send {argument} as {expected}"
    if group[0]["type"] == "missing":
        refused.cause = f"{method}: {argument} is missing; it is required"
        listing = _LISTING.get(method) if path in (["name"], ["uri"]) else None
        refused.fix = f"send {argument}" + (f" ({listing} lists them)" if listing else "")
    mended = _mended(params, path, given)
    if mended is not None:
        refused.cause += " (it is JSON text of an object: send the object itself, not text)"
        text = f"{method} {json.dumps(mended, ensure_ascii=False)}"
        refused.fix = text if len(text) <= MAX_FIX_CHARS else f"send {argument} as the object"
    payload = refused.to_payload().model_dump(mode="json", exclude_none=True)
    return MCPError(
        INVALID_PARAMS, f"{refused.code}: {refused.cause} (fix: {refused.fix})", payload
    )


def _worst(errors: list[ErrorDetails]) -> tuple[list[str], list[ErrorDetails]]:
    """The field to name and its errors: a union's members (`ref` is a prompt's or a
    resource's) are folded into one field, and the one whose every error is a wrong literal
    (`ref.type`) comes first, since it names the kinds there are."""
    by_path: dict[tuple[str, ...], list[ErrorDetails]] = {}
    for error in errors:
        path = tuple(str(p) for p in error["loc"][1:] if not _member(p))
        by_path.setdefault(path, []).append(error)
    tagged = [p for p, group in by_path.items() if all(e["type"] == "literal_error" for e in group)]
    path = tagged[0] if tagged else next(iter(by_path))
    return list(path), by_path[path]


def _member(part: str | int) -> bool:
    """Whether a loc part names a union's member model (`PromptReference`), not a field."""
    return isinstance(part, str) and part[:1].isupper()


def _expected(error: ErrorDetails) -> str:
    if error["type"] == "missing":
        return "given"
    said = _EXPECTED.get(error["type"])
    if said is not None:
        return said
    return error["msg"].removeprefix("Input should be ")


def _mended(params: Any, path: list[str], given: Any) -> dict[str, Any] | None:
    """`params` with the object that the JSON text at `path` holds in its place, or None."""
    found = object_in_text(given)
    if found is None or len(path) != 1 or not isinstance(params, Mapping):
        return None
    return {**params, path[0]: found}


__all__ = ["named_params", "params_refusal"]
