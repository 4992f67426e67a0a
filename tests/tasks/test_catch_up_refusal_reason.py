"""TASK_CATCH_UP_INVALID says the reason that holds for the value given (README "Cron tasks":
`max_catch_up` is 1 to 10,000): a value past the top would fire a burst of that many jobs in
one round, one below 1 could never fire, and a value that is no whole number is just that;
never all at once."""

from __future__ import annotations

from typing import Any

import pytest

from engine import JobRegistry
from engine.errors import JobsError
from engine.tasks import task
from engine.tasks.declare import MAX_CATCH_UP

NEVER = "no occurrence can ever fire"
BURST = "a burst of that many jobs"


def _nothing(at: int) -> list[Any]:
    return []


def _refusal(value: object) -> JobsError:
    with pytest.raises(JobsError) as caught:
        task(
            name="nightly",
            cron="0 3 * * *",
            tz="UTC",
            enqueue=_nothing,
            max_catch_up=value,  # type: ignore[arg-type]
            registry=JobRegistry(),
        )
    assert caught.value.code == "TASK_CATCH_UP_INVALID"
    assert f"a whole number from 1 to {MAX_CATCH_UP}" in caught.value.cause
    return caught.value


@pytest.mark.parametrize("value", [MAX_CATCH_UP + 1, 10**9])
def test_one_past_the_top_is_refused_as_a_burst_not_as_never_firing(value: int) -> None:
    cause = _refusal(value).cause
    assert BURST in cause and NEVER not in cause, cause


@pytest.mark.parametrize("value", [0, -1])
def test_below_one_is_refused_as_never_firing(value: int) -> None:
    cause = _refusal(value).cause
    assert NEVER in cause and BURST not in cause, cause


@pytest.mark.parametrize("value", [1.5, True, "10", None, float("nan")])
def test_no_whole_number_is_refused_as_such(value: object) -> None:
    cause = _refusal(value).cause
    assert "not a whole number" in cause and NEVER not in cause and BURST not in cause, cause
