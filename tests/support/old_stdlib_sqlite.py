"""Run Python with its own sqlite3 module claiming SQLite 3.31.0 (Ubuntu 20.04's), as a Python
built against an old system SQLite would: `python -m tests.support.old_stdlib_sqlite -m pytest
ARGS` or `... -c CODE`. The SQLite driver then runs on its fallback (engine/drivers/sqlite/
library.py) when pysqlite3 is installed, and refuses to open when it is not.
"""

from __future__ import annotations

import runpy
import sqlite3
import sys

OLD_VERSION = "3.31.0"
OLD_VERSION_INFO = (3, 31, 0)
# How a test makes pysqlite3 look missing as well: an import of it then raises ImportError.
HIDE_FALLBACK = "--hide-fallback"


def pretend_old(hide_fallback: bool) -> None:
    sqlite3.sqlite_version = OLD_VERSION
    sqlite3.sqlite_version_info = OLD_VERSION_INFO
    if hide_fallback:
        sys.modules["pysqlite3"] = None  # type: ignore[assignment]
        sys.modules["pysqlite3.dbapi2"] = None  # type: ignore[assignment]


def main(argv: list[str]) -> None:
    hide = HIDE_FALLBACK in argv
    args = [a for a in argv if a != HIDE_FALLBACK]
    pretend_old(hide)
    if args[:1] == ["-m"]:
        sys.argv = [args[1], *args[2:]]
        runpy.run_module(args[1], run_name="__main__", alter_sys=True)
    elif args[:1] == ["-c"]:
        sys.argv = ["-c", *args[2:]]
        exec(compile(args[1], "<old_stdlib_sqlite -c>", "exec"), {"__name__": "__main__"})
    else:
        usage = f"[{HIDE_FALLBACK}] -m MODULE ARGS | -c CODE"
        raise SystemExit(f"usage: python -m tests.support.old_stdlib_sqlite {usage}")


if __name__ == "__main__":
    main(sys.argv[1:])
