"""An argument left out is said to be missing, not `queue=None`: the engine's Python where the
caller (an agent's tool call, a CLI) wrote nothing. A None some code returned is a value."""

from __future__ import annotations

import pytest

from engine import Jobs
from engine.errors import InvalidArgumentError


async def test_a_pause_naming_nothing_says_no_queue_was_given(jobs: Jobs) -> None:
    with pytest.raises(InvalidArgumentError) as raised:
        await jobs.pause()
    assert raised.value.cause == (
        "no queue was given; it must be a queue's name, or else a job name as job"
    )
    assert raised.value.fix == "pass queue as a queue's name, or else a job name as job"


def test_a_value_given_is_still_named_with_its_argument() -> None:
    refused = InvalidArgumentError("limit", -1, "an integer from 1 to 500")
    assert refused.cause == "limit=-1 is not accepted; it must be an integer from 1 to 500"
    assert InvalidArgumentError("key", None, "a str").cause.startswith("key=None is not accepted")
    missing = InvalidArgumentError("limit", None, "an integer", missing=True)
    assert missing.cause == "no limit was given; it must be an integer"
