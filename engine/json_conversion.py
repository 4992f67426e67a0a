"""How a value JSON has no type for (a model, a set, a datetime...) is made JSON: the fix of a
step's or a body's output refused by the one rule (engine.storable). Read only on that refusal."""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import pathlib
import uuid
from typing import Any

from pydantic import BaseModel

from engine.storable import MAX_DEPTH


def conversion_for(value: object) -> str | None:
    """The expression that makes the first foreign value inside `value` JSON (`find_foreign`),
    or None when there is no usual one."""
    return as_json(find_foreign(value))


def as_json(value: object) -> str | None:
    """The expression that makes `value` (a value JSON has no type for) JSON, or None when
    there is no usual one. A replay returns what was stored: the JSON, not the object."""
    if value is None:
        return None
    if isinstance(value, BaseModel):
        return 'value.model_dump(mode="json")'
    if isinstance(value, set | frozenset):
        return "sorted(value)"
    if isinstance(value, datetime.date | datetime.time):
        return "value.isoformat()"
    if isinstance(value, enum.Enum):
        return "value.value"
    if isinstance(value, decimal.Decimal | uuid.UUID | pathlib.PurePath):
        return "str(value)"
    if isinstance(value, bytes | bytearray):
        return "base64.b64encode(value).decode()"
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return "dataclasses.asdict(value)"
    return None


def find_foreign(value: object, depth: int = 0) -> object | None:
    """The first value inside `value`, in `find_unstorable`'s order, of a type JSON has none of
    (a model, a set, a datetime...), or None: for a refusal's fix, on the refusal's path only."""
    if isinstance(value, str | int | float) or value is None or depth >= MAX_DEPTH:
        return None
    if isinstance(value, dict):
        items: list[Any] = list(value.values())
    elif isinstance(value, list | tuple):
        items = list(value)
    else:
        return value
    for item in items:
        found = find_foreign(item, depth + 1)
        if found is not None:
            return found
    return None


__all__ = ["as_json", "conversion_for", "find_foreign"]
