"""A retention variable written in words (`MCP_JOBS_RETAIN_DEAD='90 days'`) is refused with the
duration it says as its fix (90d), read by the one rule the faces mend `--older-than "7 days"`
by: the fix was the default (30d), and running it deleted the dead jobs 30-90 days old the
operator meant to keep. A value that stands for no duration is never mended to a shorter time."""

from __future__ import annotations

import pytest

from engine import durations
from engine.pruner import worker_policy
from engine.retention import (
    DAY_MS,
    DEFAULT_POLICY,
    Retention,
    RetentionSettingInvalidError,
    interval_from_env,
    parse_duration,
    policy_from_env,
)


def _fix_value(variable: str, typed: str) -> str:
    with pytest.raises(RetentionSettingInvalidError) as caught:
        policy_from_env(environ={variable: typed})
    assert caught.value.fix.startswith(f"export {variable}="), caught.value.fix
    return caught.value.fix.split("=", 1)[1]


@pytest.mark.parametrize(
    ("typed", "meant"),
    [
        ("90 days", "90d"),
        ("2 weeks", "14d"),
        ("12 hours", "12h"),
        ("3days", "3d"),
        (" 90 Days ", "90d"),
        ("1.5 days", "36h"),
        ("45 minutes", "45m"),
        ("5000 days", "3650d"),  # past the bound: the bound, never the default
    ],
)
def test_a_retention_in_words_is_mended_to_the_duration_it_says(typed: str, meant: str) -> None:
    value = _fix_value("MCP_JOBS_RETAIN_DEAD", typed)
    assert value == meant
    # The fix runs: the variable so set is read, as the time typed (within ten years).
    assert policy_from_env(environ={"MCP_JOBS_RETAIN_DEAD": value}).dead == parse_duration(
        "x", meant
    )


def test_the_fix_keeps_the_dead_jobs_the_default_would_have_deleted() -> None:
    kept = policy_from_env(
        environ={"MCP_JOBS_RETAIN_DEAD": _fix_value("MCP_JOBS_RETAIN_DEAD", "90 days")}
    )
    assert kept.dead == 90 * DAY_MS and DEFAULT_POLICY.dead == 30 * DAY_MS


def test_every_retention_variable_and_the_worker_read_words_alike() -> None:
    for variable in ("MCP_JOBS_RETAIN_DONE", "MCP_JOBS_RETAIN_CANCELLED", "MCP_JOBS_RETAIN_AUDIT"):
        assert _fix_value(variable, "3 days") == "3d"
    # A worker's own declaration under the variable: still the time typed, not what it keeps.
    with pytest.raises(RetentionSettingInvalidError) as caught:
        worker_policy(Retention(done="1d"), {"MCP_JOBS_RETAIN_DONE": "3 days"})
    assert caught.value.fix == "export MCP_JOBS_RETAIN_DONE=3d"


@pytest.mark.parametrize("typed", ["a quarter", "banana", "90 dayz", "-5d", "-1"])
def test_a_retention_that_stands_for_no_duration_keeps_every_row_and_says_so(typed: str) -> None:
    """No time is known that was meant, so none is guessed: the default (30d) deleted what a
    `90 dayz` meant to keep. The cause says what the fix does and what to set instead."""
    with pytest.raises(RetentionSettingInvalidError) as caught:
        policy_from_env(environ={"MCP_JOBS_RETAIN_DEAD": typed})
    assert caught.value.fix == "export MCP_JOBS_RETAIN_DEAD=forever"
    assert "stands for no duration" in caught.value.cause
    assert "forever" in caught.value.cause
    assert policy_from_env(environ={"MCP_JOBS_RETAIN_DEAD": "forever"}).dead is None


def test_through_a_running_server_the_restart_keeps_the_duration_and_the_cause() -> None:
    with pytest.raises(RetentionSettingInvalidError) as caught:
        policy_from_env(environ={"MCP_JOBS_RETAIN_DEAD": "90 days"})
    assert caught.value.restarted("mcp-jobs serve").fix == "MCP_JOBS_RETAIN_DEAD=90d mcp-jobs serve"
    with pytest.raises(RetentionSettingInvalidError) as caught:
        policy_from_env(environ={"MCP_JOBS_RETAIN_DEAD": "a while"})
    restarted = caught.value.restarted("mcp-jobs serve")
    assert restarted.fix == "MCP_JOBS_RETAIN_DEAD=forever mcp-jobs serve"
    assert "stands for no duration" in restarted.cause and "restart" in restarted.cause


@pytest.mark.parametrize(
    ("typed", "meant"),
    [
        ("10 minutes", "10m"),
        ("2 hours", "2h"),
        # Under the interval's least (1s), or no duration: its default, which deletes nothing.
        ("500 milliseconds", "5m"),
        ("a while", "5m"),
    ],
)
def test_the_prune_interval_in_words_is_mended_to_a_value_it_takes(typed: str, meant: str) -> None:
    with pytest.raises(RetentionSettingInvalidError) as caught:
        interval_from_env({"MCP_JOBS_PRUNE_EVERY": typed})
    assert caught.value.fix == f"export MCP_JOBS_PRUNE_EVERY={meant}"
    assert interval_from_env({"MCP_JOBS_PRUNE_EVERY": meant}) == parse_duration("x", meant)


def test_durations_in_words_have_one_rule() -> None:
    """The faces' words (`--older-than "7 days"`) and the variables' are read alike."""
    assert durations.spelt("2 weeks") == "2w"
    assert parse_duration("x", "2w") == 14 * DAY_MS
