"""Moments in time as the engine stores them (epoch milliseconds) and as people and agents write
them (ISO 8601 UTC, "2026-12-01T13:20:00.123Z", the `*_at_iso` every answer carries).

A caller may hand a moment in either form, or as an aware `datetime`: `instant` reads it. An
agent reads a time as text and cannot be trusted with the arithmetic to epoch milliseconds, so
the text it was shown is what it may pass back.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

from engine import bounds
from engine.errors import NOTHING_NEAR, InvalidArgumentError
from engine.iso_time import EPOCH
from engine.iso_time import iso as iso  # written here too: the module callers read times by

# Longer text is no time ISO 8601 writes (nanoseconds and a named offset fit in 40).
MAX_TIME_CHARS = 64
# A whole number of epoch milliseconds below this (2001-09-09T01:46:40Z) is refused: no job is
# meant for a time before 2001, and epoch SECONDS of any time from 2001 to year 33658 lie below
# it, so the common slip (seconds for milliseconds: a date in January 1970, run at once) is
# caught. Text and datetimes name their date plainly: an old one still means "now".
EARLIEST_MS = 10**12
_FORMS = "epoch milliseconds (a whole number) or ISO 8601 text with its zone, as *_at_iso reads"


def epoch_ms(moment: datetime) -> int:
    """An aware datetime as epoch milliseconds, exactly (whole milliseconds, rounded down)."""
    return (moment - EPOCH) // timedelta(milliseconds=1)


def instant(argument: str, value: object, low: int, high: int) -> int:
    """`value` as epoch milliseconds from `low` to `high`: a whole number of them (also as
    digits in text), an aware datetime, or ISO 8601 text with its zone. A time with no zone is
    refused with its UTC reading as the nearest value: which zone it meant is not plain."""
    if not isinstance(value, str | datetime):
        # A float too: `time.time()` is seconds, the commonest slip of all.
        if (
            isinstance(value, int | float)
            and not isinstance(value, bool)
            and math.isfinite(value)
            and value < EARLIEST_MS
        ):
            raise _too_early(argument, value, value, high)
        # A float's nearest whole number (-inf's: the low end) is refused like any below 2001.
        return bounds.whole(argument, value, max(low, EARLIEST_MS), high, "epoch milliseconds")
    if isinstance(value, str) and value.isascii() and value.isdigit():
        ms = int(value)
        if ms < EARLIEST_MS:
            raise _too_early(argument, value, ms, high)
    else:
        moment = value if isinstance(value, datetime) else _parsed(argument, value)
        if moment.utcoffset() is None:
            as_utc = iso(epoch_ms(moment.replace(tzinfo=UTC)))
            raise InvalidArgumentError(
                argument, value, f"a time with its zone ({as_utc}, if UTC)", nearest=as_utc
            )
        ms = epoch_ms(moment)
    if low <= ms <= high:
        return ms
    end = high if ms > high else low
    # The nearest in the form given: text for text, milliseconds for a datetime.
    nearest = iso(end) if isinstance(value, str) else end
    raise InvalidArgumentError(
        argument, value, f"a time from {iso(low)} to {iso(high)}", nearest=nearest
    )


def _too_early(argument: str, value: float | str, ms: float, high: int) -> InvalidArgumentError:
    """The refusal of a number `ms` below EARLIEST_MS (given as `value`). Read as epoch
    seconds of a time from 2001 to `high`, its milliseconds are the nearest value (a whole
    number, or its digits for text); else the range's low end, which runs as soon as "now"
    does."""
    as_seconds = round(ms * 1000)
    seconds = EARLIEST_MS <= as_seconds <= high
    near_ms = as_seconds if seconds else EARLIEST_MS
    nearest: object = str(near_ms) if isinstance(value, str) else near_ms
    expected = f"epoch milliseconds from {iso(EARLIEST_MS)} to {iso(high)}; {ms} is "
    expected += iso(math.floor(ms))  # iso() clamps: a number past year 1 reads as year 1
    if seconds:
        expected += f", and looks like epoch seconds ({iso(as_seconds)})"
    return InvalidArgumentError(
        argument, value, expected, fix=f"pass {argument}={nearest!r}", nearest=nearest
    )


def _parsed(argument: str, text: str) -> datetime:
    if len(text) <= MAX_TIME_CHARS:
        try:
            return datetime.fromisoformat(text)
        except ValueError:
            pass  # refused below, as text too long to be a time is
    raise InvalidArgumentError(
        argument, text, f'{_FORMS} ("2027-01-01T09:00:00Z")', nearest=NOTHING_NEAR
    )
