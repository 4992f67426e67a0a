"""A value as one shell word of a fix line: printable, one line, and bash reads the exact value
back (each case run through a real `bash -c 'printf %s WORD'`)."""

from __future__ import annotations

import shlex
import subprocess

import pytest

from engine.shell_words import for_shlex, shell_join, shell_word

VALUES = [
    "t\n1",
    "a\tb",
    "\x1b[31mred",
    "del\x7f",
    "c1\x85",
    "it's",
    "back\\slash",
    "héllo wörld ünïcödé",
    "",
    "plain",
    "a b",
    "\r\n'\\\x01\u2028",
    "\x1bab",  # a hex digit after an escape must not join it
    '$HOME `x` "q"',
]


def _bash(word: str) -> bytes:
    done = subprocess.run(
        ["bash", "-c", f"printf %s {word}"],
        capture_output=True,
        timeout=30,
        env={"LC_ALL": "C", "PATH": "/usr/bin:/bin"},  # bytes, whatever the locale
        check=True,
    )
    return done.stdout


@pytest.mark.parametrize("value", VALUES)
def test_bash_reads_the_exact_value_back(value: str) -> None:
    word = shell_word(value)
    assert word.isprintable(), word
    assert _bash(word) == value.encode()


def test_a_path_byte_that_is_not_utf8_comes_back_as_that_byte() -> None:
    value = b"/tmp/x\xff\n".decode(errors="surrogateescape")  # as os.listdir gives it
    assert _bash(shell_word(value)) == b"/tmp/x\xff\n"


@pytest.mark.parametrize("value", ["plain", "a b", "it's", "héllo", "", "-h"])
def test_a_printable_value_is_quoted_as_shlex_does(value: str) -> None:
    assert shell_word(value) == shlex.quote(value)


def test_a_joined_line_reads_back_as_its_words() -> None:
    words = ["mcp-jobs", "queues", "resume", "q\n1", "--tenant=a\tb", "it's $'x'"]
    line = shell_join(words)
    assert line.isprintable()
    assert shlex.split(for_shlex(line)) == words


def test_for_shlex_leaves_a_dollar_quote_inside_other_quotes_alone() -> None:
    # shlex.quote("a$") ends in `$'`: only a `$'` that opens a word is ANSI-C quoting.
    line = f"x {shlex.quote('a$')} \"b$'\" c\\$'d'"
    assert for_shlex(line) == line
    assert shlex.split(for_shlex(line)) == ["x", "a$", "b$'", "c$d"]
