"""The SQLite driver: the embedded default (`sqlite:///.mcp-jobs/jobs.db`), no server to run."""

from engine.drivers.sqlite.driver import COMMIT_POLL_MS, SqliteDriver

# The sqlite3 module the driver runs on (library.py): an application staging outbox rows opens
# its connection with it.
from engine.drivers.sqlite.library import sqlite3

__all__ = ["COMMIT_POLL_MS", "SqliteDriver", "sqlite3"]
