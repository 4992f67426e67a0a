"""Settings `mcp-jobs serve` is started with that used to pass without a word and break later:
a short bearer token on loopback (warned of at start, with a line that makes a long one), an
allowed-hosts variable that names no host, a blank OAuth setting, a blank token, and an
incident directory that cannot be written. Each refusal is typed and its fix runs."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from mcp_jobs.cli.parser import build_parser
from mcp_jobs.config import Settings, http_settings, read_oauth, settings_from_env
from mcp_jobs.errors import HttpSettingInvalidError, OAuthSettingInvalidError, TokenRequiredError
from mcp_jobs.server.http import MIN_EXPOSED_TOKEN_LENGTH, require_token
from tests.cli.serve_support import HTTP, no_settings_env, refused
from tests.support.fix_lines import command_words, run_fix

__all__ = ["no_settings_env"]  # the autouse fixture, active where imported

LONG = "f" * 64


# --- a short token on loopback ------------------------------------------------------------------


def test_a_short_token_on_loopback_is_warned_of_with_a_line_that_makes_a_long_one() -> None:
    from mcp_jobs.server.http import short_token_warning

    warning = short_token_warning(Settings(token="abc"))
    assert warning is not None and "abc" not in warning
    assert f"{MIN_EXPOSED_TOKEN_LENGTH} characters" in warning and "3 characters" in warning
    fix = warning.rsplit(": ", 1)[-1]
    made = run_fix(f'{fix} && printf %s "$MCP_JOBS_TOKEN"').strip()
    assert len(made) >= MIN_EXPOSED_TOKEN_LENGTH
    assert short_token_warning(Settings(token=made)) is None
    # Beyond loopback the same token is refused, not warned of (require_token runs first).
    assert short_token_warning(Settings(token="abc", host="0.0.0.0")) is None
    assert short_token_warning(Settings(token=None)) is None


def test_a_short_token_file_on_loopback_is_warned_of_with_a_line_that_rewrites_it(
    tmp_path: Path,
) -> None:
    from mcp_jobs.server.http import short_token_warning

    path = tmp_path / "token"
    path.write_text("qz7k\n")
    path.chmod(0o600)
    settings = http_settings(Settings(), token_file=str(path))
    warning = short_token_warning(settings)
    assert warning is not None and str(path) in warning and "qz7k" not in warning
    run_fix(warning.rsplit(": ", 1)[-1])
    assert short_token_warning(http_settings(Settings(), token_file=str(path))) is None


async def test_serve_says_the_short_token_warning_on_stderr_at_start(tmp_path: Path) -> None:
    """The real command, started: the warning is on stderr (the log) before the start line."""
    env = {**os.environ, "MCP_JOBS_TOKEN": "abc"}
    argv = [sys.executable, "-m", "mcp_jobs.cli", *HTTP, "--database-url", "memory://"]
    said = ""
    with anyio.fail_after(60):
        async with await anyio.open_process(
            argv, env=env, cwd=tmp_path, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL
        ) as process:
            assert process.stderr is not None
            try:
                async for chunk in process.stderr:
                    said += chunk.decode()
                    if "serving MCP at" in said:
                        break
            finally:
                process.terminate()
                await process.wait()
    assert "serving MCP at" in said, said
    (line,) = [line for line in said.splitlines() if "WARNING" in line]
    assert "3 characters" in line and "secrets" in line and "abc" not in line


# --- MCP_JOBS_ALLOWED_HOSTS ---------------------------------------------------------------------


@pytest.mark.parametrize("value", [",,", "   ", " , "])
def test_allowed_hosts_that_name_no_host_are_refused(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("MCP_JOBS_ALLOWED_HOSTS", value)
    with pytest.raises(HttpSettingInvalidError) as refusal:
        http_settings(Settings(token=LONG))
    assert "MCP_JOBS_ALLOWED_HOSTS" in refusal.value.cause
    assert refusal.value.fix == "unset MCP_JOBS_ALLOWED_HOSTS"
    # The fix, run: nothing set is no extra host.
    monkeypatch.delenv("MCP_JOBS_ALLOWED_HOSTS")
    assert http_settings(Settings(token=LONG)).allowed_hosts == ()


@pytest.mark.parametrize(
    ("value", "mended"),
    [
        ("jobs.example.com,http://proxy.example.com", "jobs.example.com,proxy.example.com"),
        ("a.example,b.example/mcp", "a.example,b.example"),
        ("a.example,http://[::1]:80/x,Proxy.Example:8443", "a.example,[::1],proxy.example"),
    ],
)
def test_a_bad_allowed_host_is_mended_keeping_the_good_ones(
    monkeypatch: pytest.MonkeyPatch, value: str, mended: str
) -> None:
    monkeypatch.setenv("MCP_JOBS_ALLOWED_HOSTS", value)
    with pytest.raises(HttpSettingInvalidError) as refusal:
        http_settings(Settings(token=LONG))
    assert refusal.value.fix.startswith("export MCP_JOBS_ALLOWED_HOSTS=")
    exported = run_fix(f'{refusal.value.fix} && printf %s "$MCP_JOBS_ALLOWED_HOSTS"')
    assert exported == mended
    monkeypatch.setenv("MCP_JOBS_ALLOWED_HOSTS", exported)
    assert http_settings(Settings(token=LONG)).allowed_hosts == tuple(mended.split(","))


# --- OAuth --------------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["", "   "])
def test_a_blank_issuer_variable_is_refused_not_read_as_no_oauth(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("MCP_JOBS_OAUTH_ISSUER", value)
    with pytest.raises(OAuthSettingInvalidError) as refusal:
        http_settings(Settings(token=LONG))
    assert "MCP_JOBS_OAUTH_ISSUER" in refusal.value.cause
    assert refusal.value.fix == "unset MCP_JOBS_OAUTH_ISSUER"
    monkeypatch.delenv("MCP_JOBS_OAUTH_ISSUER")
    assert http_settings(Settings(token=LONG)).oauth is None


@pytest.mark.parametrize(
    "name",
    [
        "MCP_JOBS_OAUTH_AUDIENCE",
        "MCP_JOBS_OAUTH_JWKS_URL",
        "MCP_JOBS_OAUTH_RESOURCE_URL",
        "MCP_JOBS_OAUTH_ALGORITHMS",
        "MCP_JOBS_OAUTH_TENANT_CLAIM",
    ],
)
def test_a_blank_oauth_variable_is_refused(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    monkeypatch.setenv("MCP_JOBS_OAUTH_ISSUER", "https://auth.example.com")
    monkeypatch.setenv(name, " ")
    with pytest.raises(OAuthSettingInvalidError) as refusal:
        read_oauth({}, "127.0.0.1", 8765)
    assert name in refusal.value.cause and refusal.value.fix == f"unset {name}"
    monkeypatch.delenv(name)
    assert read_oauth({}, "127.0.0.1", 8765) is not None


def test_an_oauth_variable_without_an_issuer_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without an issuer OAuth is off: the audience set was read by nothing."""
    monkeypatch.setenv("MCP_JOBS_OAUTH_AUDIENCE", "jobs-api")
    with pytest.raises(OAuthSettingInvalidError) as refusal:
        http_settings(Settings(token=LONG))
    assert "MCP_JOBS_OAUTH_ISSUER" in refusal.value.cause
    assert refusal.value.fix == "unset MCP_JOBS_OAUTH_AUDIENCE"


def test_a_blank_issuer_flag_is_refused_and_mended_by_leaving_it_out(
    url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MCP_JOBS_TOKEN", LONG)
    fix = refused(capsys, [*HTTP, "--oauth-issuer", "", "--database-url", url], "INVALID_ARGUMENT")
    args = build_parser().parse_args(command_words(fix)[1:])
    assert args.oauth_issuer is None and args.transport == "http"


# --- the token itself ---------------------------------------------------------------------------


def test_a_blank_token_variable_is_no_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCP_JOBS_TOKEN", "   ")
    with pytest.raises(TokenRequiredError):
        require_token(http_settings(settings_from_env()))
    # Whitespace round a token is what no Authorization header can carry (HTTP strips it).
    monkeypatch.setenv("MCP_JOBS_TOKEN", f" {LONG}\n")
    assert require_token(http_settings(settings_from_env())) == LONG


# --- MCP_JOBS_INCIDENT_DIR ----------------------------------------------------------------------


@pytest.mark.parametrize("transport", ["http", "stdio"])
def test_an_incident_dir_that_is_a_file_is_refused_at_start(
    url: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    transport: str,
) -> None:
    from mcp_jobs.incidents import check_incident_dir

    not_dir = tmp_path / "a-file"
    not_dir.write_text("")
    monkeypatch.setenv("MCP_JOBS_INCIDENT_DIR", str(not_dir / "incidents"))
    monkeypatch.setenv("MCP_JOBS_TOKEN", LONG)
    argv = [*HTTP] if transport == "http" else ["serve"]
    fix = refused(capsys, [*argv, "--database-url", url], "INCIDENT_DIR_UNWRITABLE")
    assert not Path(url.removeprefix("sqlite:///")).exists()  # refused before it opened
    exported = re.fullmatch(r"export MCP_JOBS_INCIDENT_DIR=(\S+)", fix)
    assert exported is not None, fix
    run_fix(fix)
    monkeypatch.setenv("MCP_JOBS_INCIDENT_DIR", exported[1])
    check_incident_dir()  # the directory the fix names takes incidents


def test_an_incident_dir_refusal_names_the_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mcp_jobs.incidents import IncidentDirError, check_incident_dir

    not_dir = tmp_path / "a-file"
    not_dir.write_text("")
    monkeypatch.setenv("MCP_JOBS_INCIDENT_DIR", str(not_dir))
    with pytest.raises(IncidentDirError) as refusal:
        check_incident_dir()
    assert str(not_dir) in refusal.value.cause
    assert not refusal.value.retryable and refusal.value.details == {"path": str(not_dir)}
    # Also in stdio, where no HTTP setting is read.
    monkeypatch.setenv("MCP_JOBS_INCIDENT_DIR", str(tmp_path / "fresh" / "incidents"))
    check_incident_dir()
    assert (tmp_path / "fresh" / "incidents").is_dir()
