"""Waiting for an event (issue #24 item 7): the stored event, the typed outcome of a wait, and
the matching rule every driver follows.

`await ctx.step.wait_for_event(name, match=key, timeout=s)` parks the job like a sleep until
`jobs.send_event(name, key, payload)` sends a matching event or the timeout passes. Events are
stored (`inbound_events`), so one sent before the job waits is not lost:

- an event is *live* from `sent_at` until `expires_at = sent_at + event_window` (the sender's
  `Jobs(event_window=...)`, default 24 h); the pruner deletes it after that;
- a wait matches the earliest event, by (sent_at, id), with its (name, key, tenant) that was
  still live when the wait started (`expires_at > started`) — with one window everywhere, the
  events sent at or after `started - window`;
- a later wait in the same run for the same (name, key) only matches events after the one the
  earlier wait received, so a loop of waits sees each event once;
- events are broadcast, not consumed: every waiting job with that (name, key, tenant) sees one.

Waking is a waiters index (`inbound_event_waiters`, one row per job, keyed by job id): a wait
records (name, key, tenant) → job id before it looks for an event, and a send sets `run_at` to
now on every *suspended* job in that index for its (name, key, tenant) in the transaction that
stores the event. A send that commits while the waiting job is still running (between its look
and its park) wakes nothing, so the job looks once more right after its park commits
(engine/run_job.py): either the send sees the job suspended, or the second look sees the event.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from pydantic import BaseModel, ConfigDict

from engine import bounds

# How long a sent event stays matchable by a wait that starts later (Jobs(event_window=...)).
DEFAULT_EVENT_WINDOW_MS = 24 * 3_600_000
# The largest payload an event carries, as compact UTF-8 JSON: a signal, not a document.
MAX_EVENT_PAYLOAD_BYTES = 64 * 1024
# Said with a refusal: this bound is fixed (MCP_JOBS_MAX_PAYLOAD_BYTES does not move it).
_EVENT_PAYLOAD_BOUND = (
    "an event carries a signal: keep a document in your own storage and send its id"
)

# A wait's place after the event an earlier wait of its run received: (sent_at, id).
EventCursor = tuple[int, str]


class InboundEvent(BaseModel):
    """A stored event, as `jobs.send_event` wrote it."""

    model_config = ConfigDict(frozen=True)

    id: str
    name: str
    key: str
    tenant_id: str | None = None
    payload: Any = None
    sent_at: int
    expires_at: int


class EventOutcome(BaseModel):
    """What `ctx.step.wait_for_event` returns: the event received, or the timeout that passed.
    Never an exception, so a timed-out wait cannot go unhandled by accident."""

    model_config = ConfigDict(frozen=True)

    received: bool
    event_id: str | None = None
    payload: Any = None
    key: str | None = None
    sent_at: int | None = None
    timed_out_at: int | None = None

    @classmethod
    def of(cls, event: InboundEvent) -> EventOutcome:
        return cls(
            received=True,
            event_id=event.id,
            payload=event.payload,
            key=event.key,
            sent_at=event.sent_at,
        )

    @classmethod
    def timeout(cls, at: int) -> EventOutcome:
        return cls(received=False, timed_out_at=at)


class EventSent(NamedTuple):
    """What `Jobs.send_event` answers: the stored event's id and how many waiting jobs woke."""

    event_id: str
    woken: int


# A send and a wait check their names alike (engine.bounds' name rule): a wait for a name no
# send may have could only time out.
def checked_name(name: object) -> str:
    return bounds.event_name("name", name)


def checked_key(key: object, argument: str = "key") -> str:
    """`argument`: the parameter the caller passed it as (a wait's `match`)."""
    return bounds.key(argument, key)


def checked_tenant(tenant_id: object) -> str | None:
    return bounds.optional_tenant("tenant_id", tenant_id)


def checked_payload(payload: Any) -> None:
    bounds.payload("payload", payload, MAX_EVENT_PAYLOAD_BYTES, _EVENT_PAYLOAD_BOUND)


def checked_window_ms(window: object) -> int:
    """`event_window` in seconds → ms: how long a sent event stays matchable."""
    seconds = bounds.seconds("event_window", window, low=0.001)
    return int(seconds * 1000)


def step_name(name: str) -> str:
    """The step name a wait takes unless it names one (`step=`): stable across replays."""
    return f"event:{name}"


def matches(
    event: InboundEvent,
    name: str,
    key: str,
    tenant_id: str | None,
    started_at: int,
    after: EventCursor | None,
) -> bool:
    """Whether `event` may be received by a wait for (name, key, tenant) that started at
    `started_at`, past `after` (the event an earlier wait of its run received). The memory
    driver calls this; the SQL drivers encode it, pinned by the kit (test_inbound_events.py)."""
    return (
        event.name == name
        and event.key == key
        and event.tenant_id == tenant_id
        and event.expires_at > started_at
        and (after is None or (event.sent_at, event.id) > after)
    )


def order(event: InboundEvent) -> EventCursor:
    """The order in which a wait considers events: the earliest sent first."""
    return (event.sent_at, event.id)
