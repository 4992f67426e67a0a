"""A command that acts on what is stored never creates the SQLite database it was pointed at.

A path typed wrong (`--database-url sqlite:///adir`) would otherwise get a new, empty database
that answers "no jobs", exit 0, and stays behind as a stray file. Only the commands that start
something on purpose (`worker`, `serve`, `dashboard`, `db migrate`, `demo`) create one, and any
command creates the files under `.mcp-jobs/`, the directory mcp-jobs keeps its own store in
(the default `./.mcp-jobs/jobs.db`, created on first use, and the files its fixes name there),
but for a name there that is a slip of the keys in a database beside it (`job.db`).
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path

from engine.driver_errors import DatabaseUrlInvalidError
from engine.drivers import DEFAULT_DATABASE_URL
from engine.drivers.sqlite.errors import refusal_of
from engine.drivers.urls import sqlite_path
from engine.errors import JobsError

# `.mcp-jobs`: the directory of the embedded default, whose files any command may create.
STORE_DIRECTORY = Path(sqlite_path(DEFAULT_DATABASE_URL)).parent.name
_SQLITE_HEADER = b"SQLite format 3\x00"
# How alike a file's name must be to the one typed to be offered as the database meant.
_ALIKE = 0.75


class NoDatabaseFileError(DatabaseUrlInvalidError):
    """DATABASE_URL_INVALID for a SQLite URL that names no file, from a command that only acts
    on what is stored. `near`: the absolute path of a SQLite file beside it that the URL
    plainly meant (`job.db` for `jobs.db`, `.mcp-jobs/jobs.db` for `jobs.db`), else None; the
    fix is the command on that file (cli/mend.py), else the `db migrate` that creates this one."""

    def __init__(self, url: str, path: str, near: str | None) -> None:
        self.path, self.near = path, near
        meant = f"; {near} is a SQLite database (meant that one?)" if near else ""
        super().__init__(
            url,
            reason=f"no database at {path}: no file there, and a command that reads or acts on "
            f"stored jobs creates none (db migrate, a worker or serve does){meant}",
            fix="mcp-jobs db migrate",  # written with the URL made absolute (FixContext)
            answered=True,  # the URL is well formed: the file may yet be created
        )


def require_database(url: str) -> None:
    """Raise `NoDatabaseFileError` when `url` is a SQLite URL naming no file outside the store
    directory, or one in it that plainly stands for a database there; any other URL, or one no
    driver can use (connect() says why), passes."""
    if not url.lower().startswith("sqlite://"):
        return
    try:
        path = os.path.abspath(sqlite_path(url))
    except JobsError:
        return
    if os.path.lexists(path):
        return
    if Path(path).parent.name == STORE_DIRECTORY:
        # The store's files are made on first use, but not a slip of one there (`job.db`):
        # that would answer "no jobs" from a new empty database, as anywhere else.
        near = near_database(path)
        if near is not None:
            raise NoDatabaseFileError(url, path, near)
        return
    if refusal_of(path) is not None:
        return  # a file where a directory must be: connect() names it (`ls -ld`)
    raise NoDatabaseFileError(url, path, near_database(path))


def near_database(path: str) -> str | None:
    """The SQLite file `path` plainly stands for: the same name in `.mcp-jobs/` beside it, else
    the one file in its directory whose name is most alike (a slip of the keys). None when
    there is none, or its directory cannot be read."""
    missing = Path(path)
    stored = missing.parent / STORE_DIRECTORY / missing.name
    if _is_sqlite(stored):
        return str(stored)
    try:
        names = [entry.name for entry in os.scandir(missing.parent) if entry.is_file()]
    except OSError:
        return None
    alike = difflib.get_close_matches(missing.name, names, n=3, cutoff=_ALIKE)
    found = [str(missing.parent / name) for name in alike if _is_sqlite(missing.parent / name)]
    return found[0] if found else None


def is_sqlite_file(path: Path) -> bool:
    """Whether `path` is a file that begins with SQLite's header (a jobs database, or one to be)."""
    return _is_sqlite(path)


def _is_sqlite(path: Path) -> bool:
    try:
        with path.open("rb") as file:
            return file.read(len(_SQLITE_HEADER)) == _SQLITE_HEADER
    except OSError:
        return False
