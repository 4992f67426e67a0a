"""MCP_JOBS_SESSION_IDLE_SECONDS takes what `--session-idle-seconds` takes: seconds or a
duration ("30m", "7d"), at most 7 days; the refusal of anything else says so."""

from __future__ import annotations

import pytest

from mcp_jobs.config import Settings, http_settings
from mcp_jobs.errors import HttpSettingInvalidError


@pytest.mark.parametrize(("raw", "seconds"), [("30m", 1800.0), ("7d", 604800.0), ("90", 90.0)])
def test_the_variable_takes_a_duration_as_the_flag_does(
    monkeypatch: pytest.MonkeyPatch, raw: str, seconds: float
) -> None:
    monkeypatch.delenv("MCP_JOBS_TOKEN_FILE", raising=False)
    monkeypatch.setenv("MCP_JOBS_SESSION_IDLE_SECONDS", raw)
    assert http_settings(Settings()).session_idle_seconds == seconds


def test_a_duration_past_seven_days_is_refused_at_the_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("MCP_JOBS_TOKEN_FILE", raising=False)
    monkeypatch.setenv("MCP_JOBS_SESSION_IDLE_SECONDS", "8d")
    with pytest.raises(HttpSettingInvalidError) as refused:
        http_settings(Settings())
    assert refused.value.fix == "export MCP_JOBS_SESSION_IDLE_SECONDS=604800"
    assert "30m" in refused.value.cause
