"""`task(enqueue=...)` refuses where it is written a function that cannot take the occurrence
as its one argument: taken, the task failed with TASK_ENQUEUE_FAILED at every occurrence."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from engine import JobRegistry
from engine.tasks import task
from engine.tasks.errors import TaskDeclarationInvalidError


def nothing() -> list[object]:
    return []


def _refused(enqueue: Callable[..., Any]) -> TaskDeclarationInvalidError:
    with pytest.raises(TaskDeclarationInvalidError) as raised:
        task(registry=JobRegistry(), name="zero", cron="* * * * *", tz="UTC", enqueue=enqueue)
    assert raised.value.details is not None and raised.value.details["field"] == "enqueue"
    return raised.value


def _declared_from(fix: str) -> Any:
    """The declaration the fix writes, run as given (`...`: the call's other arguments)."""
    mended = eval(fix.removeprefix('task(name="zero", enqueue=').removesuffix(", ...)"))
    return task(registry=JobRegistry(), name="zero", cron="* * * * *", tz="UTC", enqueue=mended)


async def test_a_zero_argument_lambda_is_refused_with_its_body_taking_the_occurrence() -> None:
    refused = _refused(lambda: [("job", {"n": 1})])
    assert "it takes no positional argument" in refused.cause
    assert (
        refused.fix == 'task(name="zero", enqueue=lambda occurrence_ms: [("job", {"n": 1})], ...)'
    )
    assert await _declared_from(refused.fix).entries(60_000) == [("job", {"n": 1})]


async def test_a_zero_argument_function_is_refused_and_called_from_one_that_takes_it() -> None:
    refused = _refused(nothing)
    assert refused.fix == 'task(name="zero", enqueue=lambda occurrence_ms: nothing(), ...)'
    assert await _declared_from(refused.fix).entries(60_000) == []


def test_a_function_of_two_arguments_is_refused_saying_what_it_takes() -> None:
    refused = _refused(lambda at, more: [])
    assert "it needs 2 arguments (at, more)" in refused.cause


def test_a_function_taking_the_occurrence_or_more_with_defaults_is_taken() -> None:
    for enqueue in (lambda at: [], lambda at, extra=1: [], lambda *at: []):
        task(registry=JobRegistry(), name="ok", cron="* * * * *", tz="UTC", enqueue=enqueue)
