"""What a tool argument's JSON schema takes, and a given value as the value it plainly means:
the words a refusal says an argument takes (`takes`), "5" as 5, "Dead" as "dead", JSON text as
what it spells, a duration as its seconds, a number out of range at its range's nearest end, and
the placeholder a fix shows where there is no plain value."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from engine.durations import spelt
from engine.meant import meant_choices
from engine.retention import duration_text_ms

# No value: the argument left out, or a value with no plain mend (a "<name>" slot in a fix).
MISSING: Any = object()
# pydantic's error types of a number below and above its range.
LOWER = {"greater_than", "greater_than_equal"}
UPPER = {"less_than", "less_than_equal"}
# The suffix of an argument in seconds, which a duration ("7d") plainly means.
_SECONDS = "_seconds"


def schema_kinds(schema: Mapping[str, Any]) -> set[str]:
    """The JSON kinds an argument takes, over its union's members (`member_kinds`)."""
    return {kind for variant in schema.get("anyOf", [schema]) for kind in member_kinds(variant)}


def member_kinds(schema: Mapping[str, Any]) -> set[str]:
    """The JSON kinds one schema (a union's member) takes: its type, or its values' (an enum
    published without its type)."""
    if "type" in schema:
        return {schema["type"]}
    values = schema.get("enum", [schema["const"]] if "const" in schema else [])
    return {kind for v in values for kind in json_kinds(v)}


def json_kinds(value: Any) -> set[str]:
    """The JSON Schema types a JSON value is an instance of (NaN and ±Infinity, which Python's
    JSON reads, are of none)."""
    if isinstance(value, bool):
        return {"boolean"}
    if isinstance(value, int):
        return {"integer", "number"}
    if isinstance(value, float) and not math.isfinite(value):
        return set()
    if isinstance(value, float):
        return {"number", "integer"} if value.is_integer() else {"number"}
    for kind, name in ((str, "string"), (list, "array"), (dict, "object")):
        if isinstance(value, kind):
            return {name}
    return set()


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


def plainly(schema: Mapping[str, Any], value: Any, name: str) -> Any:
    """`value` as `schema` plainly takes it ("Dead" as "dead", "5" as 5), or as given."""
    choice, guessed = as_choices(schema, value)
    if choice is not MISSING and not guessed:
        return choice
    intended = as_intended(schema, value, seconds_of=name)
    return value if intended is MISSING else intended


def as_intended(schema: Mapping[str, Any], value: Any, *, seconds_of: str = "") -> Any:
    """`value` as the value of a kind `schema` takes that it plainly means ("5" for an integer,
    "true" for a boolean, JSON text of a list or an object, and for an argument in seconds
    (`seconds_of` names it: `*_seconds`) a duration as the CLI and settings write it, "7d"; a
    list of one where one value is taken, and one value where a list of its kind is), else
    MISSING."""
    kinds = schema_kinds(schema)
    if isinstance(value, list) and len(value) == 1 and "array" not in kinds:
        return value[0] if json_kinds(value[0]) & kinds else MISSING
    if not isinstance(value, str):
        return MISSING
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
            parsed = MISSING
        if isinstance(parsed, list) and "array" in kinds:
            return parsed
        if isinstance(parsed, dict) and "object" in kinds:
            return parsed
        if parsed is MISSING and "string" not in kinds and _takes_text_items(schema):
            return [value]
    return MISSING


def object_in_text(value: Any) -> dict[str, Any] | None:
    """The JSON object `value` plainly means when it is JSON text of one (`"{}"`), as an object
    argument is mended; else None."""
    found = as_intended({"type": "object"}, value)
    return found if isinstance(found, dict) else None


def _takes_text_items(schema: Mapping[str, Any]) -> bool:
    """Whether `schema` takes a list of free text (`queues`), which one text plainly starts."""
    return any(
        member.get("type") == "array" and member.get("items", {}).get("type") == "string"
        for member in schema.get("anyOf", [schema])
    )


def as_choices(schema: Mapping[str, Any], value: Any) -> tuple[Any, bool]:
    """`value` as the choice, or list of choices, of an argument of named values that it
    stands for: a value in another case ("Dead"), one value where a list is taken ("failed"),
    text with commas ("failed,dead"); and whether a piece was only a slip of the keys ("deda",
    a guess). (MISSING, False) when a piece stands for none."""
    singles: list[str] = []
    items: list[str] = []
    for member in schema.get("anyOf", [schema]):
        singles += [v for v in member.get("enum", ()) if isinstance(v, str)]
        if member.get("type") == "array":
            items += [v for v in member.get("items", {}).get("enum", ()) if isinstance(v, str)]
    if isinstance(value, str) and value.lstrip().startswith(("[", "{")):
        return MISSING, False  # JSON text: `as_intended` reads it
    if isinstance(value, str):
        pieces = value.split(",")
    elif isinstance(value, list) and all(isinstance(v, str) for v in value):
        pieces = list(value)
    else:
        return MISSING, False
    declared = list(dict.fromkeys(singles + items))
    found = meant_choices(pieces, declared)
    if found is None and items and len(pieces) > 1:
        # Some pieces stand for none ("scheduled"): the list of those that do, a guess (a
        # narrower filter); a placeholder would drop the values the caller got right.
        kept = [meant_choices([piece], declared) for piece in pieces]
        chosen_ones = [c[0][0] for c in kept if c is not None]
        found = (list(dict.fromkeys(chosen_ones)), True) if chosen_ones else None
    if found is None:
        return MISSING, False
    chosen, guessed = found
    chosen = list(dict.fromkeys(chosen))  # a value named twice is the value once
    if isinstance(value, str) and len(chosen) == 1 and chosen[0] in singles:
        return chosen[0], guessed
    if items and all(c in items for c in chosen):
        return chosen, guessed
    return MISSING, False


def _seconds_in(text: str) -> float:
    """The seconds a duration ("90s", "30m", "7d") spells, NaN for anything else."""
    ms = duration_text_ms(text)
    words = spelt(text) if ms is None else None  # "7 days", as "7d"
    ms = duration_text_ms(words) if words is not None else ms
    return math.nan if ms is None else ms / 1000


def not_finite(value: Any) -> bool:
    """Whether `value` is NaN or ±Infinity (JSON text `NaN`, `Infinity`, which Python reads as
    numbers): no number at all, so no bound is its nearest value."""
    return isinstance(value, float) and not math.isfinite(value)


def spelt_number(value: float) -> str:
    """A non-finite number as the JSON text that carries it (`NaN`, `-Infinity`)."""
    if math.isnan(value):
        return "NaN"
    return "Infinity" if value > 0 else "-Infinity"


def nearest_in_range(error: Mapping[str, Any]) -> Any:
    """The value nearest to a refused one that its bound admits: the bound itself when
    inclusive, the next whole number past it for an integer; MISSING for a number that has
    no nearest (past an exclusive bound of a float; NaN or ±Infinity, which fail a bound but
    mean none of its values)."""
    if not_finite(error.get("input")):
        return MISSING
    bound = next(iter(error["ctx"].values()))
    if error["type"] in ("greater_than_equal", "less_than_equal"):
        return int(bound) if float(bound).is_integer() else bound
    if isinstance(error["input"], int) and float(bound).is_integer():
        return int(bound) + (1 if error["type"] == "greater_than" else -1)
    return MISSING


def placeholder(schema: Mapping[str, Any], name: str) -> Any:
    variants = schema.get("anyOf", [schema])
    kinds = schema_kinds(schema)
    if "object" in kinds:
        return {}
    if "boolean" in kinds:
        return True
    if kinds & {"integer", "number"}:
        numeric = next(s for s in variants if s.get("type") in ("integer", "number"))
        return numeric.get("minimum", 0)
    return slot(schema, name)


def slot(schema: Mapping[str, Any], name: str) -> Any:
    """The slot a fix puts for `name`, "<name>"; where only a list is taken, a list of one
    ("states": ["<state>"]), as a text slot would not even be the call's shape."""
    if "array" in schema_kinds(schema) and "string" not in schema_kinds(schema):
        return [f"<{name.removesuffix('s')}>"]
    return f"<{name}>"
