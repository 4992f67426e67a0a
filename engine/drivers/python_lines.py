"""Fix lines that are one `python -c` command: they run where only Python is installed (slim
images lack the sqlite3 shell, redis-cli, lsof and fuser)."""

from __future__ import annotations

import json

from engine.extras import this_python
from engine.shell_words import shell_word


def literal(text: str) -> str:
    """`text` as a Python string literal holding no single quote, so that shlex wraps the code
    in one pair of them instead of splicing each quote in SQL, a path or a key out of the
    shell's."""
    return json.dumps(text).replace("'", "\\u0027")


def python_line(code: str, *words: str) -> str:
    """`code`, which needs the standard library alone, run by python3; `words` follow as its
    arguments, each already one shell word."""
    return " ".join((f"python3 -c {shell_word(code)}", *words))


def package_line(code: str, *words: str) -> str:
    """`code`, which imports this package or one of its dependencies, run by `this_python`."""
    return " ".join((f"{this_python()} -c {shell_word(code)}", *words))
