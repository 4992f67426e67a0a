"""The SQLite driver: the embedded default (`sqlite:///.mcp-jobs/jobs.db`), no server to run."""

from engine.drivers.sqlite.driver import DEFAULT_POLL_MS, SqliteDriver

__all__ = ["DEFAULT_POLL_MS", "SqliteDriver"]
