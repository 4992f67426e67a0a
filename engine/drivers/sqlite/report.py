"""`mcp-jobs db report` on SQLite: the file, the library that opens it, its journal mode and
schema version, and the room left beside it. Read-only: a missing file is reported, not made.
"""

from __future__ import annotations

import os
import shutil
import urllib.parse

from engine.drivers.base import StoreReport
from engine.drivers.schema_versions import version_words
from engine.drivers.sqlite.errors import refusal_of
from engine.drivers.sqlite.library import sqlite3
from engine.drivers.sqlite.migrate import migrations
from engine.drivers.urls import migrate_fix

_VERSION = "SELECT coalesce(max(version), 0) FROM mcp_jobs_migrations"
_INSTALLED = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'mcp_jobs_migrations'"


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def report(path: str) -> StoreReport:
    """What `ServerReport.server_report` answers for the SQLite driver (blocking: run it in a
    thread)."""
    migrate = migrate_fix(f"sqlite:///{path}")
    library = f"{sqlite3.__name__} (SQLite {sqlite3.sqlite_version})"
    if not os.path.exists(path):
        refused = refusal_of(path)
        if refused is not None:
            # `db migrate` could not create it either: the fix is what stands in its way.
            said = f"file: none at {path}: {refused.reason}"
            look = f"look: {refused.error(path).fix}"
            return StoreReport(False, [said, f"library: {library}", look])
        return StoreReport(
            False, [f"file: none at {path}", f"library: {library}", f"create it: {migrate}"]
        )
    uri = "file:" + urllib.parse.quote(path) + "?mode=ro"
    try:
        db = sqlite3.connect(uri, uri=True, timeout=1.0)
        try:
            journal = db.execute("PRAGMA journal_mode").fetchone()[0]
            installed = db.execute(_INSTALLED).fetchone() is not None
            version = db.execute(_VERSION).fetchone()[0] if installed else 0
            pages = db.execute("PRAGMA page_count").fetchone()[0]
            free = db.execute("PRAGMA freelist_count").fetchone()[0]
        finally:
            db.close()
    except sqlite3.Error as exc:
        return StoreReport(
            False,
            [f"file: {path} cannot be read ({type(exc).__name__}: {exc})", f"library: {library}"],
        )
    schema = f"schema: {version_words(version, migrations()[-1].version, migrate)}"
    disk = shutil.disk_usage(os.path.dirname(path) or ".")
    return StoreReport(
        True,
        [
            f"file: {path}, {_size(path):,} bytes (write-ahead log {_size(path + '-wal'):,}), "
            f"{free:,} of {pages:,} pages free",
            f"library: {library}",
            f"journal_mode: {journal}",
            schema,
            f"disk: {disk.free:,} bytes free of {disk.total:,}",
        ],
    )


__all__ = ["report"]
