"""Models built from values already known to be of their fields' types, without validation.

For rows read back from our own schema, on the claim path of every job: the database holds the
column types, so validating them again cost more than the rest of reading the row. A field's
numeric bounds are still checked (a count edited by hand to one no job can have is refused as
validation refuses it); what else is not a column type stays the caller's to check (an unknown
status is still refused, rule 5; JSON text is still decoded). The model built equals (==) the
validated one: tests/postgres/test_trusted_rows.py.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any, TypeVar

import annotated_types
from pydantic import BaseModel

M = TypeVar("M", bound=BaseModel)


def trusted_constructor(cls: type[M]) -> Callable[[dict[str, Any]], M]:
    """A builder of `cls` from a dict holding every one of its fields, in declaration order,
    each already of its field's type. What `model_construct` does for such a dict, without its
    per-field loop over aliases and defaults (which made it slower than validating)."""
    if cls.__private_attributes__ or cls.__pydantic_post_init__ is not None:
        raise TypeError(f"{cls.__name__} has private attributes or a post-init: construct it")
    if cls.model_config.get("extra") == "allow":
        raise TypeError(f"{cls.__name__} keeps extra fields: construct it")
    every = frozenset(cls.model_fields)
    bounds = _bounds(cls)
    new = object.__new__
    put = object.__setattr__

    def build(fields: dict[str, Any]) -> M:
        for name, holds, bound in bounds:
            value = fields[name]
            if value is not None and not holds(value, bound):
                return cls.model_validate(fields)  # raises, naming the field and its bound
        model = new(cls)
        put(model, "__dict__", fields)
        # A set of its own, as validation makes: `model_copy(update=...)` adds to it.
        put(model, "__pydantic_fields_set__", set(every))
        put(model, "__pydantic_extra__", None)
        put(model, "__pydantic_private__", None)
        return model

    return build


# Each bound's kind: its check and the attribute that holds its value.
_HOLDS: dict[type, tuple[Callable[[Any, Any], bool], str]] = {
    annotated_types.Ge: (operator.ge, "ge"),
    annotated_types.Gt: (operator.gt, "gt"),
    annotated_types.Le: (operator.le, "le"),
    annotated_types.Lt: (operator.lt, "lt"),
}


def _bounds(cls: type[BaseModel]) -> list[tuple[str, Callable[[Any, Any], bool], Any]]:
    """Each numeric bound a field of `cls` declares (`Field(ge=1)`): the field, the check, the
    bound."""
    found = []
    for name, field in cls.model_fields.items():
        for meta in field.metadata:
            kind = _HOLDS.get(type(meta))
            if kind is not None:
                holds, attribute = kind
                found.append((name, holds, getattr(meta, attribute)))
    return found
