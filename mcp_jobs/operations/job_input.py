"""A registered job's input checked as the JSON its published schema describes, once its model
has taken it: pydantic's lax mode reads `true` as 1 and "1_0" as 10 (an agent's `true` deduped
into user 1's live job), which the same job known only by its published descriptor refuses
(engine/descriptors.py `validate_input`: no coercion). Both enqueue paths now agree."""

from __future__ import annotations

from typing import Any

from engine import JobRegistry
from engine.descriptors import DescriptorInvalidError, validate_input
from engine.internal_jobs import is_internal


def refuse_coerced(registry: JobRegistry, name: str, input: dict[str, Any]) -> None:
    """JOB_INPUT_INVALID when `name`'s model takes `input` only by coercing what its schema
    refuses. An input the model itself refuses is left to the engine, whose refusal names each
    field and what a misspelt one was meant as."""
    definition = registry.get(name)
    if definition is None or is_internal(name):
        return  # a published descriptor's input is checked by its schema already
    try:
        definition.parse_input(input)
        descriptor = definition.describe()
    except Exception:  # the model's refusal, or a model no schema describes: the engine answers
        return
    try:
        validate_input(descriptor, input)
    except DescriptorInvalidError:  # a schema the validator cannot build: the model decides
        return
