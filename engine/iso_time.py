"""Epoch milliseconds written as ISO 8601 UTC, the `*_at_iso` every answer carries: a leaf that
imports nothing of the engine, so an error's cause can name a time (engine/instants.py reads
times; this only writes them)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from functools import lru_cache

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# datetime's range in epoch milliseconds: the ISO reading of a time outside it is clamped.
_FIRST_MS = (datetime.min.replace(tzinfo=UTC) - EPOCH) // timedelta(milliseconds=1)
_LAST_MS = (datetime.max.replace(tzinfo=UTC) - EPOCH) // timedelta(milliseconds=1)


@lru_cache(maxsize=4096)
def _second(seconds: int) -> str:
    # A page of rows shares few seconds; a cached one costs a tenth of reading it again.
    t = EPOCH + timedelta(seconds=seconds)
    return f"{t.year:04d}-{t.month:02d}-{t.day:02d}T{t.hour:02d}:{t.minute:02d}:{t.second:02d}"


def iso(ms: int) -> str:
    """Epoch milliseconds as ISO 8601 UTC with milliseconds: "2026-12-01T13:20:00.123Z".
    Exact (no float on the way), and total: a value past year 9999 is clamped, not an error."""
    seconds, millis = divmod(min(max(ms, _FIRST_MS), _LAST_MS), 1000)
    return f"{_second(seconds)}.{millis:03d}Z"


__all__ = ["EPOCH", "iso"]
