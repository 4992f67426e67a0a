"""A stored row the driver cannot read back: another program wrote it, or its bytes are damaged.

Raised where a row is decoded, which knows the job but not the store; each driver's error
boundary, which knows the store and its fix, makes it STORE_DAMAGED (terminal).
"""

from __future__ import annotations

# What decoding a stored value raises when it is not what the driver wrote: a JSON decode error
# and pydantic's ValidationError are ValueErrors, a missing field a KeyError, a wrong type a
# TypeError.
UNDECODABLE = (ValueError, KeyError, TypeError)


class UndecodableRow(Exception):
    def __init__(self, job_id: str, exc: BaseException) -> None:
        super().__init__(f"job {job_id}: {type(exc).__name__}: {str(exc)[:200]}")
        self.job_id = job_id
