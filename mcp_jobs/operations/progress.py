"""What wait_for_job tells a caller's progress callback: the job's own numbers.

Until the job reports (`ctx.progress`, engine/progress.py) there are none: a notification then
carries the wait's line (state, attempt) at progress 0 and no total, since a total the job did
not give (the wait's length) is a bar of something else that then jumps to the job's scale.
A notification goes out when what it says changes (a poll that finds the same report again has
nothing new to say), its progress never lower than the last one's (MCP: it must grow; a retried
job counts from 0 again), and the last one, when the job is done, reaches the job's total.
"""

from __future__ import annotations

from mcp_jobs.operations.scope import Scope
from schemas.progress import Progress

DONE = "done"


class JobProgressNotes:
    """One wait's notifications: each distinct one is sent once."""

    def __init__(self) -> None:
        self._sent: tuple[float, float | None, str] | None = None

    async def send(self, scope: Scope, progress: Progress | None, line: str) -> None:
        """Notify the job's report (`progress`, None before it reports) with `line` (the wait's
        own words) before its message, unless that was said already."""
        done = 0.0 if progress is None else float(progress.done)
        total = None if progress is None or progress.total is None else float(progress.total)
        text = f"{line}: {progress.message}" if progress is not None and progress.message else line
        await self._say(scope, done, total, text)

    async def last(self, scope: Scope, progress: Progress | None, state: str) -> None:
        """The wait's last notification, the job in `state`: a done job's reaches its total
        (its last report may have stopped short of it)."""
        if state == DONE and progress is not None and progress.total is not None:
            total = float(progress.total)
            await self._say(scope, total, total, state)
        else:
            await self.send(scope, progress, state)

    async def _say(self, scope: Scope, done: float, total: float | None, text: str) -> None:
        last = 0.0 if self._sent is None else self._sent[0]
        note = (max(done, last), total, text)
        if note == self._sent:
            return
        self._sent = note
        await scope.progress(*note)
