"""`engine.retention.meant_duration`: the one reading of a duration a refusal's fix offers (CLI
`--older-than`, its unit as a word of its own, the retention variables): words and years by
engine.durations, and past ten years the bound itself, so the fix runs at once."""

from __future__ import annotations

import pytest

from engine.retention import (
    RetentionSettingInvalidError,
    meant_duration,
    parse_duration,
    policy_from_env,
)


@pytest.mark.parametrize(
    ("text", "meant"),
    [
        ("7d", "7d"),
        ("7 days", "7d"),
        ("2 weeks", "2w"),
        ("1 year", "365d"),
        ("20 years", "3650d"),
        ("20y", "3650d"),
        ("5000d", "3650d"),
        ("5000 days", "3650d"),
        ("3650d", "3650d"),
        ("a while", None),
        ("-5d", None),
    ],
)
def test_a_duration_is_read_within_its_bound(text: str, meant: str | None) -> None:
    assert meant_duration(text) == meant
    if meant is not None:
        parse_duration("older_than", meant)  # the text offered is taken as it is


@pytest.mark.parametrize("raw", ["20 years", "5000 days", "5000", "20y", "7300d"])
def test_a_retention_variable_past_ten_years_is_mended_to_the_bound_in_one_hop(raw: str) -> None:
    with pytest.raises(RetentionSettingInvalidError) as raised:
        policy_from_env(environ={"MCP_JOBS_RETAIN_DONE": raw})
    assert raised.value.default == "3650d"
    policy_from_env(environ={"MCP_JOBS_RETAIN_DONE": raised.value.default})
