"""When a cron task fires: its occurrences as epoch-ms instants, computed in the task's own zone.

Cron matches wall-clock times and the zone maps them to instants. Twice a year that map is not
one-to-one, and the rule here is the one vixie cron settled on:

- **spring forward** — a wall time that does not exist fires one gap later (`02:30` on
  2026-03-08 in America/New_York fires at 03:30 EDT); when that instant is already an occurrence
  (an hourly task's `02:00` lands on `03:00`) it fires once.
- **fall back** — a wall time that happens twice fires on the first pass only for a FIXED-time
  task (minute and hour fields both fixed, e.g. `30 1 * * *`), and on both passes for an
  INTERVAL task (minute or hour field starting with `*`, e.g. `0 * * * *`, `*/15 * * * *`),
  which means "every so much elapsed time".

So a daily `30 2 * * *` fires exactly once on both transition days, and an hourly `0 * * * *`
fires 23 times on the spring-forward day and 25 times on the fall-back day — once per hour that
actually elapsed.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from engine.tasks.cron_syntax import CronSyntaxError, normalize_cron, walk_from

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS = timedelta(milliseconds=1)
_HOUR_MS = 3_600_000
# How far around an instant to look for an offset change when sizing the DST slack. Transitions
# are months apart; a day either side sees any that can reorder occurrences near that instant.
_SPREAD_WINDOW_H = 26
# No occurrence is computed past this instant: a datetime ends with the year 9999, and the walk
# looks a day and more either side of an instant. A clock set there finds none, not an error.
_LAST_YEAR = 9999
HORIZON_MS = (datetime(_LAST_YEAR, 12, 1, tzinfo=UTC) - _EPOCH) // _MS


class Schedule:
    """One cron expression in one zone: the instants it fires at, in ascending order."""

    def __init__(self, cron: str, zone: ZoneInfo, *, hash_id: str) -> None:
        self._hash_id = hash_id.encode()
        self.cron = normalize_cron(cron, self._hash_id)
        self.zone = zone
        try:
            fields = walk_from(self.cron, datetime(2000, 1, 1), hash_id=self._hash_id).expressions
        except (ValueError, KeyError, TypeError) as exc:
            raise CronSyntaxError(str(exc) or type(exc).__name__) from exc
        # Vixie cron's own test for "interval" jobs: a wildcard in the minute or hour field.
        self.interval = str(fields[0]).startswith("*") or str(fields[1]).startswith("*")
        try:
            next(self.after(0))
        except (ValueError, KeyError, TypeError) as exc:  # croniter's errors are ValueErrors
            # Fields that each take their values, yet no date: a day the months never have.
            # Their last day (L) is what such a day plainly means.
            written = self.cron.split(" ")
            day, month = written[2:4]
            written[2] = "L"
            raise CronSyntaxError(
                f'it matches no date: no month that "{month}" names has a day-of-month "{day}" '
                "(L is each month's last day)",
                " ".join(written),
                field="day-of-month",
                token=day,
            ) from exc

    # --- wall time <-> instant ------------------------------------------------------------------

    def _naive(self, ms: int) -> datetime:
        return (_EPOCH + ms * _MS).astimezone(self.zone).replace(tzinfo=None)

    def _instants(self, wall: datetime) -> tuple[tuple[int, ...], int, int]:
        """The instants `wall` fires at, and bounds on the instants of every other wall time:
        all later wall times map at or after the first bound, all earlier ones at or before the
        second plus the local DST slack."""
        first = _ms(wall.replace(tzinfo=self.zone, fold=0))
        second = _ms(wall.replace(tzinfo=self.zone, fold=1))
        if first == second:
            return (first,), first, first
        if first < second:  # repeated wall time (fall back): fold 0 is the first pass
            fires = (first, second) if self.interval else (first,)
            return fires, first, second
        # Missing wall time (spring forward): fold 0 reads it with the offset before the gap,
        # which lands one gap later.
        return (first,), second, first

    def _spread(self, at_ms: int) -> timedelta:
        """How much the zone's UTC offset varies within a day of `at_ms` (its DST slack)."""
        offsets = {
            (_EPOCH + (at_ms + h * _HOUR_MS) * _MS).astimezone(self.zone).utcoffset()
            for h in range(-_SPREAD_WINDOW_H, _SPREAD_WINDOW_H + 1)
        }
        known = [o for o in offsets if o is not None]
        return max(known) - min(known) if known else timedelta(0)

    # --- queries --------------------------------------------------------------------------------

    def after(self, after_ms: int) -> Iterator[int]:
        """Every occurrence strictly after `after_ms`, ascending, each instant once, up to
        HORIZON_MS."""
        if after_ms >= HORIZON_MS:
            return
        start = self._naive(after_ms) - self._spread(after_ms) - timedelta(minutes=1)
        walk = walk_from(self.cron, start, hash_id=self._hash_id)
        pending: list[int] = []
        last = after_ms
        while True:
            try:
                wall: datetime = walk.get_next(datetime)
                fires, floor, _ = self._instants(wall)
            except (OverflowError, ValueError):
                if self._naive(last).year < _LAST_YEAR - 1:
                    raise  # no end of time: the expression matches no date (TASK_CRON_INVALID)
                floor = HORIZON_MS + 1  # the walk ran off the end of datetime
                fires = ()
            if floor > HORIZON_MS:
                for at in sorted(pending):
                    if last < at <= HORIZON_MS:
                        yield at
                return
            for at in fires:
                if at > after_ms:
                    heapq.heappush(pending, at)
            # Nothing generated later can map below `floor`, so everything up to it is final.
            while pending and pending[0] <= floor:
                at = heapq.heappop(pending)
                if at > last:
                    last = at
                    yield at

    def between(self, after_ms: int, until_ms: int, limit: int) -> list[int]:
        """The first `limit` occurrences in `(after_ms, until_ms]`."""
        found: list[int] = []
        if limit <= 0 or until_ms <= after_ms:
            return found
        for at in self.after(after_ms):
            if at > until_ms:
                break
            found.append(at)
            if len(found) >= limit:
                break
        return found

    def latest(self, after_ms: int, until_ms: int) -> int | None:
        """The latest occurrence in `(after_ms, until_ms]`, walking back from `until_ms` so a
        long downtime costs one step, not one per missed occurrence."""
        until_ms = min(until_ms, HORIZON_MS)
        if until_ms <= after_ms:
            return None
        slack = self._spread(until_ms) // _MS
        start = self._naive(until_ms) + timedelta(milliseconds=slack) + timedelta(minutes=1)
        walk = walk_from(self.cron, start, hash_id=self._hash_id, is_prev=True)
        best: int | None = None
        while True:
            wall: datetime = walk.get_prev(datetime)
            fires, _, ceiling = self._instants(wall)
            for at in fires:
                if after_ms < at <= until_ms and (best is None or at > best):
                    best = at
            # Earlier wall times map at or before `ceiling + slack` (a gap can push one forward).
            bound = ceiling + slack
            if (best is not None and bound < best) or bound <= after_ms:
                return best

    def next(self, after_ms: int, count: int) -> list[int]:
        found: list[int] = []
        if count <= 0:
            return found
        for at in self.after(after_ms):
            found.append(at)
            if len(found) >= count:
                break
        return found

    def local_iso(self, at_ms: int) -> str:
        """`at_ms` as an ISO-8601 wall time with its offset in this zone."""
        return (_EPOCH + at_ms * _MS).astimezone(self.zone).isoformat()


def _ms(moment: datetime) -> int:
    return (moment - _EPOCH) // _MS
