"""A `run_at` in epoch seconds (the common slip: 1798000000 for 2026-12-23) read as milliseconds
is a date in January 1970, which would run the job at once with no word. A whole number of
milliseconds before 2001-09-09 (1e12) is refused, naming the milliseconds it likely meant; a
plausible time in the past still means "now"."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from engine import Enqueue, JobContext, JobRegistry, Jobs, ManualClock, connect, job
from engine.bounds import MAX_DELAY_MS
from engine.errors import LEFT_OUT, InvalidArgumentError
from engine.instants import instant, iso

NOW = 1_796_131_200_000  # 2026-12-01T13:20:00.000Z
HIGH = NOW + MAX_DELAY_MS
EARLIEST_MS = 10**12  # 2001-09-09T01:46:40Z
SECONDS = 1_798_000_000  # 2026-12-23T... in epoch seconds


class Note(BaseModel):
    n: int


@pytest.fixture
async def jobs() -> Any:
    registry = JobRegistry()

    @job(registry=registry, idempotency_key=lambda i: f"note:{i.n}")
    async def note(i: Note, ctx: JobContext) -> None: ...

    jobs = await connect("memory://", clock=ManualClock(NOW), registry=registry, migrate=True)
    try:
        yield jobs
    finally:
        await jobs.close()


@pytest.mark.parametrize("value", [SECONDS, str(SECONDS)])
def test_epoch_seconds_are_refused_with_their_milliseconds_as_the_nearest(value: object) -> None:
    with pytest.raises(InvalidArgumentError) as refused:
        instant("run_at", value, 0, HIGH)
    exc = refused.value
    assert exc.code == "INVALID_ARGUMENT" and exc.argument == "run_at"
    assert exc.nearest == (SECONDS * 1000 if isinstance(value, int) else str(SECONDS * 1000))
    assert "epoch seconds" in exc.cause and iso(SECONDS * 1000) in exc.cause
    assert str(SECONDS * 1000) in exc.fix


def test_time_time_seconds_as_a_float_are_refused_with_their_milliseconds() -> None:
    """`run_at=time.time() + 3600`: a float of seconds, read before as a number below the
    range whose nearest was its low end (2001), which runs at once."""
    with pytest.raises(InvalidArgumentError) as refused:
        instant("run_at", SECONDS + 0.5, 0, HIGH)
    exc = refused.value
    assert exc.nearest == SECONDS * 1000 + 500
    assert "epoch seconds" in exc.cause and iso(SECONDS * 1000 + 500) in exc.cause
    assert exc.fix == f"pass run_at={SECONDS * 1000 + 500}"


@pytest.mark.parametrize("value", [0, 1, 999_999_999, -1, HIGH // 1000 + 1, EARLIEST_MS - 1])
def test_a_number_plausible_neither_as_ms_nor_as_seconds_has_the_low_end_as_nearest(
    value: int,
) -> None:
    # Before 2001 as milliseconds, and before 2001 or past the bound as seconds: the range's
    # low end is the nearest, and (a time past) it runs now.
    with pytest.raises(InvalidArgumentError) as refused:
        instant("run_at", value, 0, HIGH)
    assert refused.value.nearest == EARLIEST_MS
    assert iso(EARLIEST_MS) in refused.value.cause and "epoch seconds" not in refused.value.cause


@pytest.mark.parametrize("value", [EARLIEST_MS, NOW - 86_400_000, "1990-01-01T00:00:00Z", iso(0)])
def test_a_plausible_past_time_still_reads_as_given(value: object) -> None:
    # Past means "now" to a claim; text names its date plainly, so no slip is possible there.
    assert instant("run_at", value, 0, HIGH) <= NOW


async def test_every_enqueue_path_refuses_seconds_and_stores_nothing(jobs: Jobs) -> None:
    calls = [
        lambda: jobs.enqueue("note", {"n": 1}, run_at=SECONDS),
        lambda: jobs.enqueue_many([Enqueue("note", {"n": 2}, run_at=SECONDS)]),
        lambda: jobs.enqueue_many([("note", {"n": 3}, None, None, str(SECONDS))]),
    ]
    for call in calls:
        with pytest.raises(InvalidArgumentError) as refused:
            await call()
        assert refused.value.nearest in (SECONDS * 1000, str(SECONDS * 1000))
    assert (await jobs.list()).jobs == []
    # The fix's value is taken: the job waits for 2026-12-23.
    done = await jobs.enqueue("note", {"n": 1}, run_at=SECONDS * 1000)
    assert done.state == "delayed"
    assert (await jobs.get(done.id)).run_at == SECONDS * 1000
    # A plausible past time still runs now.
    now = await jobs.enqueue("note", {"n": 4}, run_at=NOW - 60_000)
    assert now.state == "ready"


def test_the_delay_and_run_at_refusal_reads_as_a_sentence() -> None:
    from engine.enqueue_items import _scheduled

    item = Enqueue("note", {"n": 1}, delay=5, run_at=NOW)
    with pytest.raises(InvalidArgumentError) as refused:
        _scheduled("note", False, item, None, NOW)
    assert refused.value.nearest is LEFT_OUT
    assert "as omitted" not in refused.value.fix
    assert refused.value.fix == "leave delay out: run_at already says when the job runs"
