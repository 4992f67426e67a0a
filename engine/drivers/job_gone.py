"""A settle refused because its job is no longer stored at all, told apart from one whose lease
moved on: "lease expired, cancelled or claimed by another worker" would send the operator after
a worker when what happened is that the store lost the job (reset, flushed, keys deleted).
"""

from __future__ import annotations

from engine.errors import JobSlotLostError


class JobGoneError(JobSlotLostError):
    """JOB_SLOT_LOST (its code, fix and retry class, so every caller of a settle treats it as
    one) with the cause that the job is gone from the store."""

    def __init__(self, job_id: str) -> None:
        super().__init__(job_id)
        self.cause = (
            f"job {job_id} is no longer in the store (deleted by another program, or the store "
            "was reset or lost its data); its result was not written"
        )
        self.args = (f"{self.code}: {self.cause}",)


__all__ = ["JobGoneError"]
