"""Errors only the SQLite driver raises."""

from __future__ import annotations

from engine.errors import JobsError


class OutboxWrongDatabaseError(JobsError):
    code = "OUTBOX_WRONG_DATABASE"
    title = "outbox staging was given a connection to another database file"

    def __init__(self, jobs_path: str, tx_path: str) -> None:
        super().__init__(
            f"stage() was given a connection to {tx_path}, but the jobs live in {jobs_path}; a "
            "row staged there would never be published, and a commit is atomic per file only",
            f"tx = sqlite3.connect({jobs_path!r})",
            details={"jobs_path": jobs_path, "tx_path": tx_path},
        )
