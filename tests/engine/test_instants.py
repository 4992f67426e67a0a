"""A moment handed to the engine (`run_at`) as epoch milliseconds, an aware datetime, or the
ISO 8601 text every answer shows beside a time: read exactly, refused by its form otherwise."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from pydantic import BaseModel

from engine import JobContext, JobRegistry, ManualClock, connect, job
from engine.bounds import MAX_DELAY_MS
from engine.errors import NOTHING_NEAR, InvalidArgumentError
from engine.instants import epoch_ms, instant, iso

NOW = 1_796_131_200_000  # 2026-12-01T13:20:00.000Z
HIGH = NOW + MAX_DELAY_MS
NINE = 1_798_794_000_000  # 2027-01-01T09:00:00.000Z


@pytest.mark.parametrize(
    "value",
    [
        NINE,
        "2027-01-01T09:00:00Z",
        "2027-01-01T09:00:00.000Z",
        "2027-01-01T10:00:00+01:00",
        "2027-01-01 09:00:00+00:00",
        str(NINE),
        datetime(2027, 1, 1, 9, tzinfo=UTC),
        datetime(2027, 1, 1, 4, tzinfo=timezone(timedelta(hours=-5))),
    ],
)
def test_every_form_of_one_moment_reads_as_its_epoch_milliseconds(value: object) -> None:
    assert instant("run_at", value, 0, HIGH) == NINE


def test_the_text_every_answer_shows_reads_back_exactly() -> None:
    for ms in (0, 1, NOW + 123, NINE + 999, HIGH):
        assert instant("run_at", iso(ms), 0, HIGH) == ms
    assert epoch_ms(datetime(2027, 1, 1, 9, 0, 0, 999_999, tzinfo=UTC)) == NINE + 999


@pytest.mark.parametrize(
    ("value", "nearest", "expected"),
    [
        # No zone: which one it meant is not plain, so the UTC reading is named, not assumed.
        ("2027-01-01T09:00:00", "2027-01-01T09:00:00.000Z", "zone"),
        ("2027-01-01", "2027-01-01T00:00:00.000Z", "zone"),
        (datetime(2027, 1, 1, 9), "2027-01-01T09:00:00.000Z", "zone"),
        # Out of range: the end, in the form given.
        ("2099-01-01T00:00:00Z", iso(HIGH), "from"),
        ("1969-12-31T23:59:59Z", iso(0), "from"),
        ("9" * 30, iso(HIGH), "from"),
        (datetime(2099, 1, 1, tzinfo=UTC), HIGH, "from"),
        (HIGH + 1, HIGH, "from"),
        # Before 2001 as milliseconds and as seconds: the low end (engine.instants.EARLIEST_MS).
        (-1, 10**12, "from"),
    ],
)
def test_a_refused_moment_names_the_nearest_one_taken(
    value: object, nearest: object, expected: str
) -> None:
    with pytest.raises(InvalidArgumentError) as refused:
        instant("run_at", value, 0, HIGH)
    assert refused.value.nearest == nearest and refused.value.argument == "run_at"
    assert expected in refused.value.expected


@pytest.mark.parametrize("value", ["next tuesday", "", "x" * 65, "2027-13-01T00:00:00Z", "٣"])
def test_text_that_is_no_time_is_refused_with_nothing_near(value: str) -> None:
    with pytest.raises(InvalidArgumentError) as refused:
        instant("run_at", value, 0, HIGH)
    assert refused.value.nearest is NOTHING_NEAR
    assert "ISO 8601" in refused.value.expected


@pytest.mark.parametrize("value", [True, 1.5, [NINE], {"at": NINE}])
def test_any_other_kind_is_refused(value: Any) -> None:
    with pytest.raises(InvalidArgumentError):
        instant("run_at", value, 0, HIGH)


class Note(BaseModel):
    n: int


async def test_enqueue_takes_run_at_in_any_of_its_forms() -> None:
    registry = JobRegistry()

    @job(registry=registry, idempotency_key=lambda i: f"note:{i.n}")
    async def note(i: Note, ctx: JobContext) -> None: ...

    jobs = await connect("memory://", clock=ManualClock(NOW), registry=registry, migrate=True)
    try:
        given = ["2027-01-01T09:00:00Z", datetime(2027, 1, 1, 9, tzinfo=UTC), NINE]
        for n, run_at in enumerate(given):
            result = await jobs.enqueue(note, Note(n=n), run_at=run_at)
            stored = await jobs.get(result.id)
            assert (stored.state, stored.run_at) == ("delayed", NINE), run_at
        with pytest.raises(InvalidArgumentError) as refused:
            await jobs.enqueue(note, Note(n=9), run_at="2027-01-01T09:00:00")
        assert refused.value.nearest == "2027-01-01T09:00:00.000Z"
        assert len((await jobs.list()).jobs) == 3
    finally:
        await jobs.close()
