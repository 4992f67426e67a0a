"""A refusal's fix that the CLI mends from the line typed names the `--token-file` it kept by
its absolute path, as `serve_line` does: kept as typed (`rel/tok`), the line ran only from the
directory it was typed in, and from any other named no file."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.serve_support import HTTP, no_settings_env, refused
from tests.support.fix_lines import command_words

__all__ = ["no_settings_env"]  # the autouse fixture, active where imported

TOKEN = "t" * 64
LONG = "99999999999"  # past the longest idle time a session may have


@pytest.mark.parametrize(
    ("typed", "bad", "code"),
    [
        (["--token-file", "rel/tok"], ["--session-idle-seconds", LONG], "HTTP_SETTING_INVALID"),
        (["--token-file=rel/tok"], [f"--session-idle-seconds={LONG}"], "HTTP_SETTING_INVALID"),
        (["--token-file", "./rel/../rel/tok"], ["--port=99999"], "INVALID_ARGUMENT"),
    ],
    ids=["flag-mend", "equals", "nearest"],
)
def test_the_token_file_of_a_mended_line_is_absolute(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    typed: list[str],
    bad: list[str],
    code: str,
) -> None:
    (tmp_path / "rel").mkdir()
    token = tmp_path / "rel" / "tok"
    token.write_text(TOKEN)
    token.chmod(0o600)
    monkeypatch.chdir(tmp_path)
    argv = [*HTTP, *typed, *bad, "--database-url", f"sqlite:///{tmp_path / 'j.db'}"]
    words = command_words(refused(capsys, argv, code))
    named = [w.partition("=")[2] for w in words if w.startswith("--token-file=")]
    named += [words[n + 1] for n, w in enumerate(words) if w == "--token-file"]
    assert named == [str(token)], words
