"""What wait_for_job tells a caller's progress callback once the job reports its own progress.

Before the job reports, a wait's notifications count the time waited of the wait's length.
Once it has (`ctx.progress`, engine/progress.py), they carry the job's own numbers and message
instead, each value once: a notification's progress must grow, and a poll that finds the same
report again has nothing new to say.
"""

from __future__ import annotations

from mcp_jobs.operations.scope import Scope
from schemas.progress import Progress


class JobProgressNotes:
    """One wait's notifications of the job's reports: each distinct report is sent once."""

    def __init__(self) -> None:
        self._sent: Progress | None = None

    async def send(self, scope: Scope, progress: Progress, line: str) -> None:
        """Notify `progress` with `line` (the wait's own words) before its message, unless
        this report was sent already."""
        if progress == self._sent:
            return
        self._sent = progress
        text = f"{line}: {progress.message}" if progress.message else line
        total = None if progress.total is None else float(progress.total)
        await scope.progress(float(progress.done), total, text)
