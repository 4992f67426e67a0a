"""Occurrences in the task's zone, and what DST days do to them.

The rule (engine/tasks/occurrences.py): a wall time that does not exist fires one gap later, once;
a wall time that happens twice fires on the first pass for a fixed-time task and on both passes
for an interval task (a `*` in the minute or hour field). So a daily task fires once on each
transition day and an hourly task fires once per hour that actually elapsed: 23 and 25 times.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from itertools import pairwise
from zoneinfo import ZoneInfo

import pytest

from engine.tasks import Schedule

NEW_YORK = ZoneInfo("America/New_York")


def ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def local_day(zone: ZoneInfo, year: int, month: int, day: int) -> tuple[int, int]:
    """[local midnight, next local midnight) as epoch ms (23, 24 or 25 hours long)."""
    start = datetime(year, month, day, tzinfo=zone)
    following = datetime.combine(start.date() + timedelta(days=1), start.time(), tzinfo=zone)
    return ms(start), ms(following)


def fired_on(schedule: Schedule, zone: ZoneInfo, year: int, month: int, day: int) -> list[str]:
    start, end = local_day(zone, year, month, day)
    return [schedule.local_iso(at)[11:] for at in schedule.between(start - 1, end - 1, 10_000)]


SPRING = (2026, 3, 8)  # 02:00 EST -> 03:00 EDT
FALL = (2026, 11, 1)  # 02:00 EDT -> 01:00 EST


@pytest.mark.parametrize(
    ("cron", "day", "expected"),
    [
        # 02:30 does not exist on the spring day: it fires one gap later, 03:30 EDT.
        ("30 2 * * *", SPRING, ["03:30:00-04:00"]),
        ("30 2 * * *", FALL, ["02:30:00-05:00"]),
        # 01:30 happens twice on the fall day: a daily task fires on the first pass only.
        ("30 1 * * *", FALL, ["01:30:00-04:00"]),
        ("30 1 * * *", SPRING, ["01:30:00-05:00"]),
        # Exactly at the transition: 02:00 on the spring day is 03:00 EDT.
        ("0 2 * * *", SPRING, ["03:00:00-04:00"]),
        ("0 3 * * *", SPRING, ["03:00:00-04:00"]),
    ],
)
def test_a_daily_task_fires_exactly_once_on_each_transition_day(
    cron: str, day: tuple[int, int, int], expected: list[str]
) -> None:
    schedule = Schedule(cron, NEW_YORK, hash_id="t")
    assert fired_on(schedule, NEW_YORK, *day) == expected


def test_an_hourly_task_fires_once_per_elapsed_hour_across_transitions() -> None:
    hourly = Schedule("0 * * * *", NEW_YORK, hash_id="t")
    spring = fired_on(hourly, NEW_YORK, *SPRING)
    fall = fired_on(hourly, NEW_YORK, *FALL)
    ordinary = fired_on(hourly, NEW_YORK, 2026, 6, 1)
    assert (len(spring), len(fall), len(ordinary)) == (23, 25, 24)
    assert spring[:4] == ["00:00:00-05:00", "01:00:00-05:00", "03:00:00-04:00", "04:00:00-04:00"]
    assert fall[:4] == ["00:00:00-04:00", "01:00:00-04:00", "01:00:00-05:00", "02:00:00-05:00"]
    # Once per elapsed hour: consecutive occurrences are exactly one hour apart all the way.
    start, end = local_day(NEW_YORK, *FALL)
    instants = hourly.between(start - 1, end - 1, 100)
    assert {b - a for a, b in pairwise(instants)} == {3_600_000}


def test_a_quarter_hourly_task_repeats_the_repeated_hour() -> None:
    quarterly = Schedule("*/15 * * * *", NEW_YORK, hash_id="t")
    assert len(fired_on(quarterly, NEW_YORK, *SPRING)) == 23 * 4
    assert len(fired_on(quarterly, NEW_YORK, *FALL)) == 25 * 4


@pytest.mark.parametrize(
    ("zone", "spring", "fall"),
    [
        ("Europe/London", (2026, 3, 29), (2026, 10, 25)),  # 01:00 -> 02:00, 02:00 -> 01:00
        ("Australia/Sydney", (2026, 10, 4), (2026, 4, 5)),  # southern hemisphere
    ],
)
def test_other_zones_follow_the_same_rule(
    zone: str, spring: tuple[int, int, int], fall: tuple[int, int, int]
) -> None:
    tz = ZoneInfo(zone)
    hourly = Schedule("0 * * * *", tz, hash_id="t")
    assert len(fired_on(hourly, tz, *spring)) == 23
    assert len(fired_on(hourly, tz, *fall)) == 25
    for cron in ("30 1 * * *", "30 2 * * *"):
        daily = Schedule(cron, tz, hash_id="t")
        assert len(fired_on(daily, tz, *spring)) == 1
        assert len(fired_on(daily, tz, *fall)) == 1


def test_a_task_fires_in_its_own_zone_not_utc() -> None:
    kolkata = ZoneInfo("Asia/Kolkata")
    schedule = Schedule("0 9 * * *", kolkata, hash_id="t")
    after = ms(datetime(2026, 1, 1, tzinfo=kolkata))
    (first,) = schedule.next(after, 1)
    assert schedule.local_iso(first) == "2026-01-01T09:00:00+05:30"
    assert first == ms(datetime(2026, 1, 1, 3, 30, tzinfo=ZoneInfo("UTC")))


@pytest.mark.parametrize("cron", ["30 1 * * *", "0 * * * *", "*/20 1 * * *", "45 2 * * *"])
def test_latest_agrees_with_walking_forward_around_transitions(cron: str) -> None:
    """`latest` walks backwards (one step after a long downtime); it must pick exactly what the
    forward walk would, including the repeated and the missing hour."""
    schedule = Schedule(cron, NEW_YORK, hash_id="t")
    for day in (SPRING, FALL):
        start, end = local_day(NEW_YORK, *day)
        window = schedule.between(start - 86_400_000, end + 86_400_000, 10_000)
        for until in range(start - 3_600_000, end + 3_600_000, 7 * 60_000):
            for after in (until - 1, until - 3_600_000, until - 10 * 3_600_000):
                expected = [at for at in window if after < at <= until]
                assert schedule.latest(after, until) == (expected[-1] if expected else None)


def test_latest_after_a_year_of_downtime_is_the_last_occurrence() -> None:
    schedule = Schedule("* * * * *", NEW_YORK, hash_id="t")
    now = ms(datetime(2027, 1, 1, 12, 0, 30, tzinfo=NEW_YORK))
    latest = schedule.latest(now - 366 * 86_400_000, now)
    assert latest == ms(datetime(2027, 1, 1, 12, 0, tzinfo=NEW_YORK))
