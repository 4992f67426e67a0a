"""The sqlite3 module the driver runs on: Python's own when the SQLite it links is new enough,
else pysqlite3's (`pip install pysqlite3-binary`), which carries a current SQLite of its own.

Python built against an old system SQLite (RHEL 8, Ubuntu 20.04, Debian 11) links one older than
the driver needs. Every module of the driver imports `sqlite3` from here, so that the classes
it catches are those of the connections it opens. An application staging outbox rows opens its
connection with the same module: two copies of SQLite on one file in one process can release
each other's locks.
"""

from __future__ import annotations

import importlib
import platform
import sysconfig
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING

from engine.extras import this_python

# RETURNING and upserts on a partial unique index.
MIN_SQLITE = (3, 35, 0)
FALLBACK_MODULE = "pysqlite3.dbapi2"
FALLBACK_PACKAGE = "pysqlite3-binary"


def new_enough(module: ModuleType) -> bool:
    return tuple(module.sqlite_version_info) >= MIN_SQLITE


def choose(stdlib: ModuleType, load_fallback: Callable[[], ModuleType | None]) -> ModuleType:
    """Python's own module when its SQLite is new enough, else the fallback when it is installed
    and new enough, else Python's own (the connection then refuses to open: too_old_fix)."""
    if new_enough(stdlib):
        return stdlib
    fallback = load_fallback()
    return fallback if fallback is not None and new_enough(fallback) else stdlib


def load_fallback() -> ModuleType | None:
    try:
        return importlib.import_module(FALLBACK_MODULE)
    except ImportError:
        return None


def fallback_has_wheels(build_platform: str, libc: str) -> bool:
    """Whether pip can install FALLBACK_PACKAGE here without a compiler: it publishes wheels for
    glibc Linux on x86_64 only."""
    return build_platform == "linux-x86_64" and libc == "glibc"


def too_old_fix(
    executable: str | None = None, build_platform: str | None = None, libc: str | None = None
) -> str:
    """The command that gets this interpreter a new enough SQLite: the fallback's wheel where
    one exists; elsewhere a Python build that bundles a current SQLite (uv's). The arguments
    default to this interpreter's own."""
    python = this_python(executable)
    if build_platform is None:
        build_platform = sysconfig.get_platform()
    if libc is None:
        libc = platform.libc_ver()[0]  # reads the interpreter's binary: only when asked
    if fallback_has_wheels(build_platform, libc):
        return f"{python} -m pip install {FALLBACK_PACKAGE}"
    # Managed only: a system Python 3.12 could link the same old SQLite. --seed gives it pip.
    uv_venv = "uv venv --seed --python 3.12 --python-preference only-managed .venv"
    return f"{python} -m pip install uv && {python} -m {uv_venv}"


if TYPE_CHECKING:
    import sqlite3 as sqlite3
else:
    import sqlite3 as _stdlib

    sqlite3 = choose(_stdlib, load_fallback)
