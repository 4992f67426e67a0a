"""Two sweeps for the CLI's `--write --wait` tests: one whose pass fails for good
(BACKFILL_STALLED: `count()` matches a row `read()` never returns) and one whose handler always
fails (each attempt is retried 30 s later). Nothing of the app's is touched."""

from __future__ import annotations

from typing import Any

from engine.backfill import BackfillRegistry, backfill


class SweepFailure(Exception):
    """The app's handler failing, as a plain exception."""


async def one_row() -> int:
    return 1


async def nothing_to_read(after: Any, limit: int) -> list[dict[str, int]]:
    return []


async def the_row(after: Any, limit: int) -> list[dict[str, int]]:
    return [{"id": 1}] if after is None else []


async def handle_nothing(rows: list[Any]) -> None:
    return None


async def handle_failing(rows: list[Any]) -> None:
    raise SweepFailure("customers 1..1: database is locked")


def declare(registry: BackfillRegistry | None = None) -> None:
    """Declare both, in `registry` (the process-wide one when None)."""
    backfill(
        name="stalls_at_once",
        count=one_row,
        read=nothing_to_read,
        key=lambda row: row["id"],
        handle=handle_nothing,
        registry=registry,
    )
    backfill(
        name="fails_each_attempt",
        count=one_row,
        read=the_row,
        key=lambda row: row["id"],
        handle=handle_failing,
        registry=registry,
    )
