"""Pages of history: the cursors of a trace's steps and events, and the arms of a filtered list.

A trace answers the newest `limit` steps and events (oldest first within the page) and a cursor
for the ones before them, so a job with 20,000 steps answers a small page. A cursor is opaque to
callers; a driver encodes its own order key with these functions (steps: start time and the
position that breaks ties; events: the event's sequence number) and the client checks the text
before any driver sees it.

A filtered list of jobs reads one arm per side of the live/settled split: one arm over the live
states it wants (few rows, one partial index) and one per settled state (newest first in a
partial index led by the filter), merged by id. `list_arms` says which.
"""

from __future__ import annotations

from collections.abc import Sequence

from engine.errors import InvalidArgumentError
from schemas.states import JOB_STATES, LIVE_STATES, SETTLED_STATES, JobState

DEFAULT_TRACE_PAGE = 50  # steps, and events, in one trace page unless asked otherwise
MAX_TRACE_PAGE = 500
MAX_CURSOR_BYTES = 64

_STEP_EXPECTED = "a steps_cursor from a previous trace page"
_EVENT_EXPECTED = "an events_cursor from a previous trace page"


def step_cursor(started_at: int, position: int) -> str:
    return f"{started_at}.{position}"


def parse_step_cursor(value: str) -> tuple[int, int]:
    """(started_at, position) of a steps cursor; INVALID_ARGUMENT when it is not one."""
    head, dot, tail = value.partition(".")
    if dot and _is_whole(head) and _is_whole(tail):
        return int(head), int(tail)
    raise InvalidArgumentError("steps_cursor", value, _STEP_EXPECTED)


def event_cursor(seq: int) -> str:
    return str(seq)


def parse_event_cursor(value: str) -> int:
    if _is_whole(value):
        return int(value)
    raise InvalidArgumentError("events_cursor", value, _EVENT_EXPECTED)


def _is_whole(text: str) -> bool:
    # At most 19 digits: a bigint, whatever the driver stores.
    return 0 < len(text) <= 19 and text.isascii() and text.isdigit()


def list_arms(
    states: Sequence[JobState] | None,
) -> tuple[tuple[JobState, ...], tuple[JobState, ...]]:
    """(the live states a filtered list reads in one arm, the settled states it reads one arm
    each), in the vocabulary's order. No states given means every known state."""
    wanted = set(JOB_STATES if states is None else states)
    live = tuple(s for s in LIVE_STATES if s in wanted)
    settled = tuple(s for s in SETTLED_STATES if s in wanted)
    return live, settled


def quoted(states: Sequence[JobState]) -> str:
    """States as SQL literals. Only names from the vocabulary reach here (checked on the way
    in), so the text is one of a fixed set, never a caller's."""
    for s in states:
        if s not in JOB_STATES:
            raise InvalidArgumentError("state", s, f"one of {', '.join(JOB_STATES)}")
    return ", ".join(f"'{s}'" for s in states)
