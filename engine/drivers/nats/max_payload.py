"""What a fix says when a job's value is past what this NATS server takes in one message: the
server's `max_payload` to set (a value that holds it, not "raise it"), with every other setting
the same value needs, in one line; or, past any NATS server's limit, that none can hold it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from engine.bounds import PAYLOAD_CEILING, PAYLOAD_ENV
from schemas.errors import ErrorPayload

# nats-server refuses a max_payload past 64 MB (its MAX_PAYLOAD_MAX_SIZE).
SERVER_CEILING = 64 * 1024 * 1024
# A KV write's headers ride in the same message, and the server counts them against
# max_payload (nats-py checks the value alone; the server closes a connection that overshoots).
HEADER_ROOM = 512
# What a settle or step write adds to the job's value beside the value itself (its record's
# fields, a step's name and times): a max_payload named for an output keeps this much over.
SLACK = 1024
# The code and detail fields of the engine's own output bound (engine.errors
# JobOutputTooLargeError), whose fix exports the bound alone.
_OUTPUT_CODE = "JOB_OUTPUT_INVALID"


def needed(value_bytes: int, room: int = 0) -> int:
    """The max_payload that takes a value of `value_bytes` keeping `room` free, in whole KiB."""
    total = value_bytes + room + HEADER_ROOM
    return -(-total // 1024) * 1024


def set_line(max_payload: int) -> str:
    """The config change, as written in nats-server's config file."""
    return f"set max_payload: {max_payload} in nats-server's config and restart it"


def too_large(what: str) -> str:
    return (
        f"{what} (a job is one NATS value, and nats-server takes at most {SERVER_CEILING} "
        "bytes in one: its max_payload cannot go higher)"
    )


def output_fix(origin: str, max_payload: int) -> str:
    """A step or output (`origin`) the job's value cannot hold on this server."""
    if max_payload > SERVER_CEILING:
        return too_large(f"return from {origin} a reference to the data (a key, a URL)")
    return f"return a smaller value from {origin}, or {set_line(max_payload)}"


def for_this_server(
    error: ErrorPayload | None, held_bytes: Callable[[], int], room: int, server_max: int
) -> ErrorPayload | None:
    """`error` as stored on this server: the engine's output bound, whose fix exports a larger
    bound, names the max_payload that value needs too when this server's is short of it
    (following the export alone, the server refused it next). `held_bytes`: the job's value
    now; `room`: what its writes keep free."""
    details: dict[str, Any] = dict(error.details or {}) if error is not None else {}
    size, bound = details.get("size"), details.get("bound")
    if error is None or error.code != _OUTPUT_CODE or "max_payload" in details:
        return error
    if not isinstance(size, int) or not isinstance(bound, int) or size > PAYLOAD_CEILING:
        return error  # not the bound's error, or one whose fix already says to send less
    wanted = needed(held_bytes() + size + SLACK, room)
    if wanted <= server_max:
        return error  # this server holds it: the export alone works
    origin = str(details.get("origin", "the job"))
    if wanted > SERVER_CEILING:
        fix = too_large(f"return from {origin} a reference to the data (a key, a URL)")
    else:
        fix = f"{set_line(wanted)}, then export {PAYLOAD_ENV}={size}"
    return error.model_copy(update={"fix": fix, "details": {**details, "max_payload": wanted}})
