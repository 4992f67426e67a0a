"""What a fix says when a job's value is past what this NATS server takes in one message: the
server's `max_payload` to set (a value that holds it, not "raise it"), with every other setting
the same value needs, in one line; or, past any NATS server's limit, that none can hold it.

The engine asks (engine.drivers.base `RecordBounds`) where its own bound refuses a value, so
its first refusal names the max_payload too; the driver's own refusals (a value within the
engine's bound, past the server's) name it as they are raised (connection.TooLarge,
enqueue.check_fits)."""

from __future__ import annotations

from engine.drivers.base import RecordNeeds

# nats-server's own max_payload when its config sets none: what a server too small for any job
# is told to set, at least (room for inputs beside the one refused).
DEFAULT_MAX_PAYLOAD = 1024 * 1024
# nats-server refuses a max_payload past 64 MB (its MAX_PAYLOAD_MAX_SIZE).
SERVER_CEILING = 64 * 1024 * 1024
# A KV write's headers ride in the same message, and the server counts them against
# max_payload (nats-py checks the value alone; the server closes a connection that overshoots).
HEADER_ROOM = 512
# What a settle or step write adds to the job's value beside the value itself (its record's
# fields, a step's name and times): a max_payload named for an output keeps this much over.
SLACK = 1024
README_BOUND = 'README, "NATS": a job is one KV value, within the server\'s max_payload'


def needed(value_bytes: int, room: int = 0) -> int:
    """The max_payload that takes a value of `value_bytes` keeping `room` free, in whole KiB."""
    total = value_bytes + room + HEADER_ROOM
    return -(-total // 1024) * 1024


def set_line(max_payload: int) -> str:
    """The config change, as written in nats-server's config file."""
    return f"set max_payload: {max_payload} in nats-server's config and restart it"


def beyond_any_server() -> str:
    """Why no NATS server holds a value past SERVER_CEILING."""
    return (
        f"a job is one NATS value, and nats-server takes at most {SERVER_CEILING} bytes in "
        "one: its max_payload cannot go higher"
    )


def too_large(what: str) -> str:
    return f"{what} ({beyond_any_server()})"


def output_fix(origin: str, max_payload: int) -> str:
    """A step or output (`origin`) the job's value cannot hold on this server."""
    if max_payload > SERVER_CEILING:
        return too_large(f"return from {origin} a reference to the data (a key, a URL)")
    return f"return a smaller value from {origin}, or {set_line(max_payload)}"


def record_needs(most: int, wanted: int, server_max: int) -> RecordNeeds:
    """What a value needs of this server (its max_payload `server_max`): a max_payload of
    `wanted`, or, past any server's, none can hold it. `most`: the largest such value it
    holds now."""
    if wanted > SERVER_CEILING:
        return RecordNeeds(max(0, most), beyond_any_server(), None, {})
    reason = (
        f"this NATS server holds a job in one value of at most its max_payload, {server_max} "
        f"bytes; {README_BOUND}"
    )
    return RecordNeeds(max(0, most), reason, set_line(wanted), {"max_payload": wanted})


def output_needs(held_bytes: int, size: int, room: int, server_max: int) -> RecordNeeds | None:
    """A step's or output's `size` bytes of JSON more in a job's value of `held_bytes`, keeping
    `room` free for its writes after: None when this server holds it."""
    wanted = needed(held_bytes + size + SLACK, room)
    if wanted <= server_max:
        return None
    most = server_max - HEADER_ROOM - room - held_bytes - SLACK
    return record_needs(most, wanted, server_max)
