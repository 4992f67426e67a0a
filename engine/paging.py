"""Pages of history: the cursors of a list, a trace's steps and events, a backfill's runs and
describe_jobs' names, and the arms of a filtered list.

A trace answers the newest `limit` steps and events (oldest first within the page) and a cursor
for the ones before them, so a job with 20,000 steps answers a small page.

Every cursor is opaque and checked: a version tag, then base64url of the position the driver needs
(a list: the last job id; steps: start time and the position that breaks ties; events: the event's
sequence number; runs: start time and run id; names: the last name of the page) and a 4-byte
digest of the position, its kind and what it pages (a list's filters, a trace's job id, a
backfill's name: a cursor sent with other filters, another job or another name than the call that
returned it is refused instead of paging on through rows the first page never chose). Text that
does not decode — garbage, a cut or edited cursor, one of another kind or of another job's pages —
is CURSOR_INVALID, never a silent restart at page one. The digest is a check, not a secret: a
forged cursor only moves the caller within rows it could list anyway.

A filtered list of jobs reads one arm per side of the live/settled split: one arm over the live
states it wants (few rows, one partial index) and one per settled state (newest first in a
partial index led by the filter), merged by id. `list_arms` says which.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import struct
from collections.abc import Iterable, Sequence

from engine import bounds
from engine.client_calls import CLIENT, first_page
from engine.errors import CursorInvalidError, CursorOfAnotherListError, InvalidArgumentError
from schemas.errors import NextCall
from schemas.jobs import DamagedJob, JobFilter, JobPage, JobRecord
from schemas.states import JOB_STATES, LIVE_STATES, SETTLED_STATES, JobState

DEFAULT_TRACE_PAGE = 50  # steps, and events, in one trace page unless asked otherwise
MAX_TRACE_PAGE = 500

# "c1." then base64url without padding. A new encoding gets a new tag, so an old cursor is
# refused (CURSOR_INVALID) instead of being misread.
_TAG = "c1."
_CHECK_BYTES = 4
_BODY = re.compile(r"[A-Za-z0-9_-]+")
_INT = struct.Struct(">q")
_TWO_INTS = struct.Struct(">qq")


def _encoded_length(payload_bytes: int) -> int:
    n = payload_bytes + _CHECK_BYTES
    return len(_TAG) + (4 * n + 2) // 3  # unpadded base64 of n bytes


MAX_CURSOR_BYTES = _encoded_length(_TWO_INTS.size)  # a steps or events cursor
MAX_LIST_CURSOR_BYTES = _encoded_length(bounds.MAX_ID_BYTES)
MAX_RUNS_CURSOR_BYTES = _encoded_length(_INT.size + bounds.MAX_ID_BYTES)
MAX_NAMES_CURSOR_BYTES = _encoded_length(bounds.MAX_NAME_BYTES)
MAX_ANY_CURSOR_BYTES = max(
    MAX_CURSOR_BYTES, MAX_LIST_CURSOR_BYTES, MAX_RUNS_CURSOR_BYTES, MAX_NAMES_CURSOR_BYTES
)


def _check(kind: str, payload: bytes, bound: bytes) -> bytes:
    person = kind.encode()
    return hashlib.blake2b(payload + bound, digest_size=_CHECK_BYTES, person=person).digest()


def encode(kind: str, payload: bytes, bound: bytes = b"") -> str:
    """`payload` encoded; `bound`: what else the check covers (not encoded, so a cursor
    decodes only beside the same)."""
    body = base64.urlsafe_b64encode(payload + _check(kind, payload, bound)).rstrip(b"=")
    return _TAG + body.decode("ascii")


def decode(
    kind: str,
    argument: str,
    value: object,
    max_bytes: int,
    call: NextCall | None,
    bound: bytes = b"",
    handed: str = "a cursor from a previous page",
) -> bytes:
    """The position `value` encodes. Not text at all is INVALID_ARGUMENT; text that is not a
    cursor of this kind (whatever is wrong with it) is CURSOR_INVALID, its fix `call`: the same
    call without the cursor."""
    if not isinstance(value, str):
        raise InvalidArgumentError(argument, value, f"the {argument} text of a previous answer")
    body = value[len(_TAG) :]
    if (
        len(value) <= max_bytes
        and value.startswith(_TAG)
        and _BODY.fullmatch(body)
        and len(body) % 4 != 1
    ):
        raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
        payload, check = raw[:-_CHECK_BYTES], raw[-_CHECK_BYTES:]
        # Only the canonical spelling: the unused low bits of the last character count too.
        if (
            len(raw) > _CHECK_BYTES
            and check == _check(kind, payload, bound)
            and encode(kind, payload, bound) == value
        ):
            return payload
    refuse_other_kind(kind, value, call)
    raise CursorInvalidError(argument, value, call, handed)


# Which tool hands out each kind of cursor, and the argument it goes back as: a cursor sent to
# another is refused naming its owner (the MCP layer's CURSOR_WRONG_TOOL).
CURSOR_OWNERS: dict[str, tuple[str, str]] = {
    "jobs": ("list_jobs", "cursor"),
    "steps": ("inspect_job", "steps_cursor"),
    "events": ("inspect_job", "events_cursor"),
    "runs": ("list_backfills", "runs_cursor"),
    "names": ("describe_jobs", "cursor"),
}
# The same for a Python caller: the method that hands out each kind (on `jobs`, the client, or a
# backfill service) and its parameter that takes it back. No method pages names: describe_jobs
# (and `jobs describe`) page them above the engine.
CURSOR_METHODS: dict[str, tuple[str, str]] = {
    "jobs": (f"{CLIENT}.list", "cursor"),
    "steps": (f"{CLIENT}.trace", "steps_cursor"),
    "events": (f"{CLIENT}.trace", "events_cursor"),
    "runs": ("Backfills.runs_page", "cursor"),
}
# A list cursor's position: a job id as `engine.ids` makes them.
_JOB_ID = re.compile(rb"[0-9a-f]{32}")


def cursor_kind(value: object) -> str | None:
    """The kind (a key of CURSOR_OWNERS) of the cursor `value` is, whichever call it goes with;
    None when it is no cursor this server hands out. A bound cursor's check covers what it
    pages (a list's filters, a trace's job, a backfill's name), unknown here, so one whose check
    does not hold is still of the kind its position's shape says, in the canonical spelling."""
    if not isinstance(value, str) or len(value) > MAX_ANY_CURSOR_BYTES:
        return None
    body = value[len(_TAG) :]
    if not value.startswith(_TAG) or not _BODY.fullmatch(body) or len(body) % 4 == 1:
        return None
    raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
    payload, check = raw[:-_CHECK_BYTES], raw[-_CHECK_BYTES:]
    if len(raw) <= _CHECK_BYTES:
        return None
    for kind in CURSOR_OWNERS:
        if check == _check(kind, payload, b"") and encode(kind, payload) == value:
            return kind
    canonical = base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii") == body
    return _shaped(payload) if canonical else None


def _shaped(payload: bytes) -> str | None:
    """The bound kind whose position `payload` is shaped as: a job id (a list), two positions
    (steps), one (events), one and a run id (runs). Bytes no store counts to (a name's text, an
    edited cursor's) are none: such a cursor is CURSOR_INVALID, not another tool's."""
    if _JOB_ID.fullmatch(payload):
        return "jobs"
    if len(payload) == _TWO_INTS.size:
        return "steps" if all(map(_counted, _TWO_INTS.unpack(payload))) else None
    if len(payload) == _INT.size:
        return "events" if _counted(*_INT.unpack(payload)) else None
    position = _run_position(payload)
    return "runs" if position is not None and _counted(position[0]) else None


# Past any epoch ms (the year 10889, as engine.ids) or row a store counts: a position beyond it
# is text or an edit. (One past it anyway is still read; only its kind goes unnamed.)
_POSITION_CAP = 1 << 48


def _counted(position: int) -> bool:
    return 0 <= position < _POSITION_CAP


def refuse_other_kind(kind: str, value: str, call: NextCall | None) -> None:
    """Raise CURSOR_INVALID naming the method that handed `value` out when it is a cursor of
    another kind than `kind`, the one being read: the fix is `call`'s first page as the Python
    line that asks for it (`first_page`). Nothing when it is none of ours, no method hands it
    out (describe_jobs'), or no first page is known (a driver reached directly). The MCP face
    names the tool instead, before this leaves it (mcp_jobs/operations/cursors.py)."""
    found = cursor_kind(value)
    line = None if call is None else first_page(call)
    owner = None if found is None else CURSOR_METHODS.get(found)
    if owner is None or found == kind or call is None or line is None:
        return
    method, argument = CURSOR_METHODS[kind]
    raise CursorOfAnotherListError(argument, value, owner, method, call, line)


# --- a list of jobs: the last id of the page ---------------------------------------------------


_LIST_HANDED = (
    "a cursor from a previous page of a list with these filters (a cursor goes with the state, "
    "name, queue and tenant_id of the call that returned it)"
)


def _filters(wanted: JobFilter) -> bytes:
    """What a list cursor is bound to: its list's filters (none: nothing, so the cursors of
    an unfiltered list read as before filters were bound). The order of states is no filter."""
    states = sorted(set(wanted.states)) if wanted.states else None
    chosen = (states, wanted.name, wanted.queue, wanted.tenant_id)
    if chosen == (None, None, None, None):
        return b""
    return json.dumps(chosen, ensure_ascii=False, separators=(",", ":")).encode()


def list_cursor(last_id: str, wanted: JobFilter) -> str:
    """The cursor after `last_id` in the list `wanted` filters."""
    return encode("jobs", last_id.encode(), _filters(wanted))


def parse_list_cursor(value: object, wanted: JobFilter, call: NextCall | None = None) -> str:
    """The job id a list cursor continues after, when it was handed out for `wanted`'s
    filters."""
    bound = _filters(wanted)
    payload = decode("jobs", "cursor", value, MAX_LIST_CURSOR_BYTES, call, bound, _LIST_HANDED)
    try:
        return bounds.text("cursor", payload.decode(), bounds.MAX_ID_BYTES)
    except (UnicodeDecodeError, InvalidArgumentError):
        raise CursorInvalidError("cursor", str(value), call, _LIST_HANDED) from None


# --- a trace: steps by (started_at, position), events by sequence, of one job -----------------


_TRACE_HANDED = (
    "a cursor from a previous page of this job's trace (a cursor goes with the job_id of the "
    "call that returned it)"
)


def _job(job_id: str) -> bytes:
    """What a steps or events cursor is bound to: the job it pages (a position is the job's
    own: in another job's history it skips or repeats rows)."""
    return job_id.encode()


def step_cursor(job_id: str, started_at: int, position: int) -> str:
    return encode("steps", _TWO_INTS.pack(started_at, position), _job(job_id))


def parse_step_cursor(value: object, job_id: str, call: NextCall | None = None) -> tuple[int, int]:
    """(started_at, position) of a steps cursor `job_id`'s trace handed out; CURSOR_INVALID when
    it is not one."""
    payload = decode(
        "steps", "steps_cursor", value, MAX_CURSOR_BYTES, call, _job(job_id), _TRACE_HANDED
    )
    if len(payload) != _TWO_INTS.size:
        raise CursorInvalidError("steps_cursor", str(value), call, _TRACE_HANDED)
    started_at, position = _TWO_INTS.unpack(payload)
    return started_at, position


def event_cursor(job_id: str, seq: int) -> str:
    return encode("events", _INT.pack(seq), _job(job_id))


def parse_event_cursor(value: object, job_id: str, call: NextCall | None = None) -> int:
    """The sequence number of an events cursor `job_id`'s trace handed out."""
    payload = decode(
        "events", "events_cursor", value, MAX_CURSOR_BYTES, call, _job(job_id), _TRACE_HANDED
    )
    if len(payload) != _INT.size:
        raise CursorInvalidError("events_cursor", str(value), call, _TRACE_HANDED)
    (seq,) = _INT.unpack(payload)
    return int(seq)


# --- a backfill's runs: (started_at, run_id), of one name -----------------------------------------


_RUNS_HANDED = (
    "a cursor from a previous page of this backfill's runs (a cursor goes with the name of the "
    "call that returned it)"
)


def runs_cursor(started_at: int, run_id: str, name: str) -> str:
    """The cursor after (started_at, run_id) in backfill `name`'s runs."""
    return encode("runs", _INT.pack(started_at) + run_id.encode(), name.encode())


def parse_runs_cursor(
    value: object, name: str, call: NextCall | None = None, argument: str = "runs_cursor"
) -> tuple[int, str]:
    """The position a runs cursor of backfill `name` names. `argument`: the parameter the
    caller gave it as (the MCP tool's `runs_cursor`, the Python method's `cursor`), which a
    refusal names."""
    payload = decode(
        "runs", argument, value, MAX_RUNS_CURSOR_BYTES, call, name.encode(), _RUNS_HANDED
    )
    position = _run_position(payload)
    if position is None:
        raise CursorInvalidError(argument, str(value), call, _RUNS_HANDED)
    return position


def _run_position(payload: bytes) -> tuple[int, str] | None:
    """(started_at, run_id) of a runs cursor's payload, None when it holds no such thing."""
    try:
        (started_at,) = _INT.unpack(payload[: _INT.size])
        run_id = bounds.text("runs_cursor", payload[_INT.size :].decode(), bounds.MAX_ID_BYTES)
    except (struct.error, UnicodeDecodeError, InvalidArgumentError):
        return None
    return int(started_at), run_id


# --- describe_jobs: job and task names, by name -------------------------------------------------


def names_cursor(last: str) -> str:
    """The cursor after `last`, the last job or task name of a describe_jobs page."""
    return encode("names", last.encode())


def parse_names_cursor(value: object, call: NextCall | None = None) -> str:
    """The name a describe_jobs cursor continues after; CURSOR_INVALID when it is not one."""
    payload = decode("names", "cursor", value, MAX_NAMES_CURSOR_BYTES, call)
    try:
        return bounds.text("cursor", payload.decode(), bounds.MAX_NAME_BYTES)
    except (UnicodeDecodeError, InvalidArgumentError):
        raise CursorInvalidError("cursor", str(value), call) from None


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


def page_of(
    records: Iterable[JobRecord], filter: JobFilter, unreadable: Iterable[DamagedJob] = ()
) -> JobPage:
    """A list page from records held in memory (the memory driver's, the NATS driver's replica):
    the filter's matches, newest id first, after the cursor; `unreadable` rows in their places."""
    rows: list[JobRecord | DamagedJob] = [
        job
        for job in records
        if (filter.states is None or job.state in filter.states)
        and (filter.name is None or job.name == filter.name)
        and (filter.queue is None or job.queue == filter.queue)
        and (filter.tenant_id is None or job.tenant_id == filter.tenant_id)
        and (filter.cursor is None or job.id < filter.cursor)
    ]
    rows.extend(d for d in unreadable if filter.cursor is None or d.id < filter.cursor)
    rows.sort(key=lambda j: j.id, reverse=True)
    return cut_page(rows, filter.limit)


def cut_page(found: Sequence[JobRecord | DamagedJob], limit: int) -> JobPage:
    """The page of the first `limit` of `found` (newest first; more than `limit` means there
    are more). A row that cannot be read keeps its place, so the cursor moves past it too."""
    page = found[:limit]
    more = len(found) > limit
    return JobPage(
        jobs=[j for j in page if isinstance(j, JobRecord)],
        next_cursor=page[-1].id if more and page else None,
        damaged=[d for d in page if isinstance(d, DamagedJob)],
    )
