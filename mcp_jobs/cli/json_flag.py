"""A JSON object typed after a flag (`events send --payload`, `jobs enqueue --input`), read
strictly: text that is no JSON is not taken as a string, a number past a float's range or a
NaN is refused, and an object naming a key twice is not read as its last value."""

from __future__ import annotations

import ast
import json
import math
from typing import Any

from engine.errors import NOTHING_NEAR, InvalidArgumentError


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e309: JSON, but no number a payload can store
        raise ValueError(f"{text} is past a float's range")
    return value


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is no JSON value")  # NaN, Infinity: Python's, not JSON's


def _one_value_per_key(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    value = dict(pairs)
    if len(value) < len(pairs):  # json.loads keeps the last silently: which one was meant?
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise ValueError(f"the key {json.dumps(key)[:80]} is given twice")
            seen.add(key)
    return value


def json_value(flag: str, text: str, expected: str, *, non_finite: bool = False) -> Any:
    """`text` parsed strictly, or INVALID_ARGUMENT for `flag` saying why (`expected`, and the
    parser's words). `non_finite`: NaN, Infinity and a number past a float's range are read as
    the floats they stand for, where what reads the value refuses them by its field (a job's
    input: JOB_INPUT_INVALID at the field, as the Python API and MCP say it)."""
    try:
        return json.loads(
            text,
            parse_float=float if non_finite else _finite,
            parse_constant=float if non_finite else _no_constant,
            object_pairs_hook=_one_value_per_key,
        )
    except ValueError as exc:
        meant = _python_literal(text)
        raise InvalidArgumentError(
            flag, text, f"{expected} ({exc})", nearest=NOTHING_NEAR if meant is None else meant
        ) from exc


def _python_literal(text: str) -> str | None:
    """The JSON of `text` written as Python (`{'n': 1}`, `True`, `None`): the same value, so
    the refusal's fix is the line with it; None for anything else, JSON's own refusals (a key
    given twice, a NaN) among them."""
    try:
        json.loads(text)
        return None  # JSON, refused by the strict reading: no Python reading mends it
    except ValueError:
        pass
    try:
        tree = ast.parse(text.strip(), mode="eval")
        value = ast.literal_eval(tree)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    if not isinstance(value, dict | list) or _a_key_twice(tree):
        return None
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError):  # a set, bytes, a tuple key: no JSON for it
        return None


def _a_key_twice(tree: ast.AST) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            keys = [ast.dump(k) for k in node.keys if k is not None]
            if len(set(keys)) < len(keys):
                return True
    return False


def json_object(
    flag: str, text: str | None, expected: str, *, non_finite: bool = False
) -> dict[str, Any]:
    """The object typed after `flag` (`{}` when it is left out), parsed as `json_value` reads."""
    if text is None:
        return {}
    value = json_value(flag, text, expected, non_finite=non_finite)
    if not isinstance(value, dict):
        raise InvalidArgumentError(flag, text, expected)
    return value
