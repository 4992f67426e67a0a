"""What the tests of `serve`'s start share: its HTTP argv, the settings variables cleared around
each test, and the fix a refusal prints."""

from __future__ import annotations

import pytest

from mcp_jobs.cli import main

HTTP = ["serve", "--transport", "http", "--port", "0"]
SETTINGS_ENV = (
    "MCP_JOBS_TOKEN",
    "MCP_JOBS_TOKEN_FILE",
    "MCP_JOBS_SESSION_IDLE_SECONDS",
    "MCP_JOBS_ALLOWED_HOSTS",
    "MCP_JOBS_OAUTH_ISSUER",
    "MCP_JOBS_OAUTH_AUDIENCE",
    "MCP_JOBS_OAUTH_JWKS_URL",
    "MCP_JOBS_OAUTH_RESOURCE_URL",
    "MCP_JOBS_OAUTH_ALGORITHMS",
    "MCP_JOBS_OAUTH_TENANT_CLAIM",
)


@pytest.fixture(autouse=True)
def no_settings_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in SETTINGS_ENV:
        monkeypatch.delenv(name, raising=False)


def refused(capsys: pytest.CaptureFixture[str], argv: list[str], code: str) -> str:
    """The fix `main(argv)` prints with its refusal `code`."""
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert f"error {code}:" in err, err
    (fix,) = [line for line in err.splitlines() if line.startswith("  fix:")]
    return fix.removeprefix("  fix:").strip()
