"""The SQLite driver: the embedded default (`sqlite:///.mcp-jobs/jobs.db`), no server to run."""

from engine.drivers.sqlite.driver import COMMIT_POLL_MS, SqliteDriver

__all__ = ["COMMIT_POLL_MS", "SqliteDriver"]
