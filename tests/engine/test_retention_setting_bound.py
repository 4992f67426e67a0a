"""A retention setting past the ten-year bound names that bound, and its fix is the bound
(3650d), not the setting's default: the value was a duration, only too long."""

from __future__ import annotations

import pytest

from engine.retention import (
    RetentionSettingInvalidError,
    interval_from_env,
    parse_duration,
    policy_from_env,
)


@pytest.mark.parametrize("variable", ["MCP_JOBS_RETAIN_DONE", "MCP_JOBS_RETAIN_AUDIT"])
def test_a_retention_past_ten_years_is_mended_to_ten_years(variable: str) -> None:
    with pytest.raises(RetentionSettingInvalidError) as caught:
        policy_from_env(environ={variable: "3651d"})
    assert "ten years" in caught.value.cause
    assert caught.value.fix == f"export {variable}=3650d"
    assert parse_duration("x", caught.value.fix.split("=", 1)[1]) is not None


def test_a_prune_interval_past_ten_years_is_mended_to_ten_years() -> None:
    with pytest.raises(RetentionSettingInvalidError) as caught:
        interval_from_env({"MCP_JOBS_PRUNE_EVERY": "9999d"})
    assert "ten years" in caught.value.cause
    assert caught.value.fix == "export MCP_JOBS_PRUNE_EVERY=3650d"


def test_a_value_that_is_no_duration_keeps_every_row() -> None:
    """No duration is read in it, so none shorter than meant is guessed (the default was)."""
    with pytest.raises(RetentionSettingInvalidError) as caught:
        policy_from_env(environ={"MCP_JOBS_RETAIN_DONE": "a while"})
    assert caught.value.fix == "export MCP_JOBS_RETAIN_DONE=forever"
    assert "stands for no duration" in caught.value.cause
