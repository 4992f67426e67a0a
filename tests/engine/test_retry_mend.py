"""A bad `Retry(...)` is refused with the policy mended as the fix: the value it plainly meant
(2.0 attempts is 2, "7d" of delay is 604800 seconds), else the nearest allowed, else the default."""

from __future__ import annotations

from typing import Any

import pytest

from engine.retry import Retry


@pytest.mark.parametrize(
    ("given", "mended"),
    [
        ({"attempts": 2.0}, {"attempts": 2}),
        ({"attempts": 2.5}, {"attempts": 3}),  # no whole number is plainly meant: the default
        ({"attempts": 0}, {"attempts": 1}),
        # max_delay is at least base_delay: the mend raises it too.
        ({"base_delay": "7d"}, {"base_delay": 604800.0, "max_delay": 604800.0}),
        ({"base_delay": "90s", "max_delay": "2h"}, {"base_delay": 90.0, "max_delay": 7200.0}),
        ({"base_delay": "soon"}, {"base_delay": 1.0}),
        ({"max_delay": "30m"}, {"max_delay": 1800.0}),
        # Ten years at most.
        ({"base_delay": "4000d"}, {"base_delay": 315_360_000.0, "max_delay": 315_360_000.0}),
    ],
)
def test_the_mended_policy_keeps_what_the_value_meant(
    given: dict[str, Any], mended: dict[str, Any]
) -> None:
    assert Retry(**given).mended() == Retry(**mended)
