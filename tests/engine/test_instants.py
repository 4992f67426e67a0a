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
    ("value", "nearest"),
    [
        ("2027-01-01T09:00:00", "2027-01-01T09:00:00.000Z"),
        ("2027-01-01", "2027-01-01T00:00:00.000Z"),
        (datetime(2027, 1, 1, 9), "2027-01-01T09:00:00.000Z"),
    ],
)
def test_a_time_without_its_zone_is_refused_with_its_utc_reading(
    value: object, nearest: str
) -> None:
    """Which zone it meant is not plain: the refusal names the UTC reading, never assumes it."""
    with pytest.raises(InvalidArgumentError) as refused:
        instant("run_at", value, 0, HIGH)
    assert refused.value.nearest == nearest
    assert nearest in str(refused.value) and "zone" in refused.value.expected


@pytest.mark.parametrize(
    ("value", "nearest"),
    [
        ("2099-01-01T00:00:00Z", iso(HIGH)),
        ("1969-12-31T23:59:59Z", iso(0)),
        ("9" * 30, iso(HIGH)),
        (datetime(2099, 1, 1, tzinfo=UTC), HIGH),
        (HIGH + 1, HIGH),
        (-1, 0),
    ],
)
def test_a_moment_out_of_range_is_refused_with_the_end_in_the_form_given(
    value: object, nearest: object
) -> None:
    with pytest.raises(InvalidArgumentError) as refused:
        instant("run_at", value, 0, HIGH)
    assert refused.value.nearest == nearest
    assert refused.value.argument == "run_at"


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
