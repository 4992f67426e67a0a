"""What `serve --transport http` checks before it starts, and the fix each refusal prints: an
OAuth URL that names no host is mended with a slot (never a guessed host glued to the text), an
idle period past a week is refused at the bound, a token file others can read is refused beyond
loopback and warned of on it, and a missing token is fixed by the token file."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from mcp_jobs.cli.parser import build_parser
from mcp_jobs.cli.serve import token_file_warning
from mcp_jobs.config import MAX_SESSION_IDLE_SECONDS, Settings, http_settings, read_oauth
from mcp_jobs.errors import HttpSettingInvalidError
from mcp_jobs.server.http import require_token
from tests.cli.serve_support import HTTP, no_settings_env, refused
from tests.support.fix_lines import command_words, run_fix

__all__ = ["no_settings_env"]  # the autouse fixture, active where imported

TOKEN = "f" * 64


# --- #10: an OAuth URL with no host -------------------------------------------------------------


def test_an_issuer_that_names_no_host_is_mended_with_a_slot(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    fix = refused(
        capsys,
        [*HTTP, "--oauth-issuer", "not-a-url", "--database-url", url],
        "OAUTH_SETTING_INVALID",
    )
    assert "auth.example.com" not in fix and "not-a-url" not in fix
    words = command_words(fix)
    assert words[words.index("--oauth-issuer") + 1] == "<issuer URL>"


def test_an_issuer_without_its_scheme_is_mended_to_https(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    typed = "auth.example.com/realms/jobs"
    fix = refused(
        capsys, [*HTTP, "--oauth-issuer", typed, "--database-url", url], "OAUTH_SETTING_INVALID"
    )
    args = build_parser().parse_args(command_words(fix)[1:])
    assert args.oauth_issuer == "https://auth.example.com/realms/jobs"
    assert read_oauth({"issuer": args.oauth_issuer}, "127.0.0.1", 8765) is not None


def test_an_issuer_variable_that_names_no_host_is_exported_as_a_slot(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MCP_JOBS_OAUTH_ISSUER", "not-a-url")
    with pytest.raises(Exception) as refusal:
        read_oauth({}, "127.0.0.1", 8765)
    assert getattr(refusal.value, "fix", None) == "export MCP_JOBS_OAUTH_ISSUER='<issuer URL>'"


# --- #19: the idle period's bound ---------------------------------------------------------------


@pytest.mark.parametrize("typed", ["1e12", "30d"])
def test_an_idle_period_past_a_week_is_mended_to_the_week(
    url: str, capsys: pytest.CaptureFixture[str], typed: str
) -> None:
    argv = [*HTTP, "--session-idle-seconds", typed, "--database-url", url]
    fix = refused(capsys, argv, "HTTP_SETTING_INVALID")
    args = build_parser().parse_args(command_words(fix)[1:])
    assert args.session_idle_seconds == MAX_SESSION_IDLE_SECONDS == 7 * 24 * 3600
    settings = http_settings(Settings(token=TOKEN), session_idle_seconds=args.session_idle_seconds)
    assert settings.session_idle_seconds == MAX_SESSION_IDLE_SECONDS
    assert not (Path(url.removeprefix("sqlite:///"))).exists()  # refused before it opened


def test_an_idle_period_variable_past_a_week_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCP_JOBS_SESSION_IDLE_SECONDS", "1e12")
    with pytest.raises(HttpSettingInvalidError) as refusal:
        http_settings(Settings(token=TOKEN))
    assert refusal.value.fix == "export MCP_JOBS_SESSION_IDLE_SECONDS=604800"
    monkeypatch.setenv("MCP_JOBS_SESSION_IDLE_SECONDS", "604800")
    assert http_settings(Settings(token=TOKEN)).session_idle_seconds == 604800


# --- #18: the token file ------------------------------------------------------------------------


def _token_file(place: Path, mode: int) -> Path:
    path = place / "token"
    path.write_text(f"{TOKEN}\n")
    path.chmod(mode)
    return path


def test_a_token_file_others_can_read_is_refused_beyond_loopback(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _token_file(tmp_path, 0o644)
    argv = [*HTTP, "--host", "0.0.0.0", "--token-file", str(path), "--database-url", url]
    fix = refused(capsys, argv, "HTTP_TOKEN_FILE_EXPOSED")
    assert TOKEN not in fix and fix == f"chmod 600 {path}"
    subprocess.run(["sh", "-c", fix], check=True, timeout=30)
    assert path.stat().st_mode & 0o777 == 0o600
    settings = http_settings(Settings(host="0.0.0.0"), token_file=str(path))
    assert token_file_warning(settings) is None


def test_a_token_file_others_can_read_is_warned_of_on_loopback(tmp_path: Path) -> None:
    path = _token_file(tmp_path, 0o640)
    settings = http_settings(Settings(), token_file=str(path))
    warning = token_file_warning(settings)
    assert warning is not None and "0640" in warning and TOKEN not in warning
    # The chmod it names, run, quiets it.
    subprocess.run(["sh", "-c", warning.split(": ")[-1]], check=True, timeout=30)
    assert token_file_warning(settings) is None
    # A token from the environment has no file to speak of.
    assert token_file_warning(Settings(token=TOKEN)) is None


def test_a_missing_token_is_fixed_by_the_token_file(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fix = refused(capsys, [*HTTP, "--database-url", url], "HTTP_TOKEN_REQUIRED")
    assert "MCP_JOBS_TOKEN=" not in fix
    write, _, serve = fix.partition(" && ")
    run_fix(write)  # writes the file named in the serve line, the owner's alone
    args = build_parser().parse_args(command_words(serve)[1:])
    path = Path(args.token_file)
    assert path == tmp_path / ".mcp-jobs" / "token" and path.is_absolute()
    assert re.fullmatch("[0-9a-f]{64}\n", path.read_text())
    assert os.stat(path).st_mode & 0o777 == 0o600
    settings = http_settings(Settings(), token_file=args.token_file)
    assert require_token(settings) == path.read_text().strip()
    # A file that holds a token already is served as it is, never overwritten.
    again = refused(capsys, [*HTTP, "--database-url", url], "HTTP_TOKEN_REQUIRED")
    assert " && " not in again
    assert build_parser().parse_args(command_words(again)[1:]).token_file == str(path)
