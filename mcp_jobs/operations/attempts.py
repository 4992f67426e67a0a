"""The attempt counter a wait reports, kept monotone across polls.

Between two polls a job may be retried (requeued with its attempt count back at 0) or claimed
and handed back uncounted, so the record's `attempt` can go down. A progress line that counts
backwards reads as a bug; this counts the attempts seen in all, and once the count restarted
says how many since.
"""

from __future__ import annotations

from schemas.jobs import JobRecord


class AttemptCounter:
    def __init__(self) -> None:
        self._current = 0  # the record's attempt at the last poll
        self._earlier = 0  # attempts counted before the count last restarted

    def line(self, record: JobRecord) -> str:
        """`"<state> (attempt N of M)"`, N never below an earlier line's."""
        if record.attempt < self._current:
            self._earlier += self._current  # requeued: the record counts from 0 again
        self._current = record.attempt
        if not self._earlier:
            return f"{record.state} (attempt {self._current} of {record.max_attempts})"
        return (
            f"{record.state} (attempt {self._earlier + self._current} in all; "
            f"{self._current} of {record.max_attempts} since it was requeued)"
        )


__all__ = ["AttemptCounter"]
