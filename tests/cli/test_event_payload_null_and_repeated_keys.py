"""`events send --payload` must be one JSON object: `null` (no object) and an object that
names a key twice (which value is meant?) are refused as `[1]` or `7` are, before anything
opens, and nothing is sent."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.support import run
from tests.support.fix_lines import command_words


@pytest.mark.parametrize(
    ("payload", "said"),
    [
        ("null", "a JSON object"),  # was sent as an event with no payload, exit 0
        ('{"a": 1, "a": 2}', '"a"'),  # was sent as {"a": 2}: the first value dropped
        ('{"o": {"k": 1, "k": 1}}', '"k"'),
    ],
)
def test_a_payload_that_is_null_or_repeats_a_key_is_refused(
    payload: str, said: str, url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["events", "send", "n", "k", "--payload", payload, "--database-url", url, "--json"]
    code, refused = run(capsys, *argv)
    assert code == 1, refused
    error = refused["error"]
    assert (error["code"], error["retryable"]) == ("INVALID_ARGUMENT", False)
    assert said in error["cause"]
    assert command_words(error["fix"])[:4] == ["mcp-jobs", "events", "send", "--help"], error
    assert not Path(url.removeprefix("sqlite:///")).exists()  # refused before anything opens
