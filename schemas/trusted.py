"""Models built from values already known to be of their fields' types, without validation.

For rows read back from our own schema, on the claim path of every job: the database holds the
column types, so validating them again cost more than the rest of reading the row. What is not a
column type stays the caller's to check (an unknown status is still refused, rule 5; JSON text is
still decoded). The model built equals (==) the validated one: tests/postgres/test_trusted_rows.py.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

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
    new = object.__new__
    put = object.__setattr__

    def build(fields: dict[str, Any]) -> M:
        model = new(cls)
        put(model, "__dict__", fields)
        # A set of its own, as validation makes: `model_copy(update=...)` adds to it.
        put(model, "__pydantic_fields_set__", set(every))
        put(model, "__pydantic_extra__", None)
        put(model, "__pydantic_private__", None)
        return model

    return build
