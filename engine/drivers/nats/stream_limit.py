"""A bucket's stream at its own `max_bytes` or `max_msgs` (discard new, the KV default) refuses
every write as STORAGE_FULL, though no disk is full. What the refusal and `db nats-report` say of
it, and the line that raises the limit: run through nats-py with the Python mcp-jobs runs on,
since the `nats` CLI is seldom installed where the application runs."""

from __future__ import annotations

from collections.abc import Sequence

from nats.js.api import StreamInfo

from engine.driver_errors import StorageFullError
from engine.drivers.python_lines import package_line
from engine.drivers.urls import url_word
from engine.errors import JobsError

# How near its limit a stream counts as full: the refused write's size is not known, and a
# job's value is a few KiB. At most half the limit, so a small cap is not full when empty.
FULL_SHARE = 0.05
FULL_MIN_BYTES = 8 * 1024
# The stream's reply for each limit (nats-server's "stream store failed" descriptions).
LIMITS = {"maximum bytes exceeded": "max_bytes", "maximum messages exceeded": "max_msgs"}
# Sets the stream argv[2]'s limit argv[3] to argv[4] on the servers of the URL argv[1].
_RAISE = "import sys; from engine.drivers.nats.stream_raise import main; main(sys.argv[1:])"


class StreamFullError(StorageFullError):
    """STORAGE_FULL where the bucket's stream is at a limit of its own: the code, title and
    retry class are STORAGE_FULL's, the cause names the stream and the limit."""

    def __init__(self, bucket: str, limit: str, detail: str, fix: str) -> None:
        JobsError.__init__(
            self,
            f"nats: the bucket's stream KV_{bucket} reached its own {limit} limit and refuses "
            f"writes ({detail}); nothing of the refused write was stored. The server's disk and "
            "account limits are not what is full: raise the stream's limit, or free room by "
            "pruning settled jobs",
            fix,
            details={"driver": "nats", "where": f"KV_{bucket} {limit}"},
        )


def raise_line(url: str, stream: str, limit: str, value: int) -> str:
    return package_line(_RAISE, url_word(url), stream, limit, str(value))


def full_lines(streams: Sequence[StreamInfo], url: str) -> list[str]:
    """A line for each stream at (or near) its own limit, saying how to raise it or free room."""
    lines = []
    for info in streams:
        config = info.config
        for limit, used, cap, least in (
            ("max_bytes", info.state.bytes, config.max_bytes, FULL_MIN_BYTES),
            ("max_msgs", info.state.messages, config.max_msgs, 1),
        ):
            name = config.name
            if name is None or cap is None or cap <= 0 or used < cap - _margin(cap, least):
                continue
            lines.append(
                f"stream {name} is full: {used:,} of its {limit} {cap:,}, so it refuses "
                f"writes (STORAGE_FULL). Raise it to {2 * cap:,}: "
                f"{raise_line(url, name, limit, 2 * cap)}; or free room: "
                f"mcp-jobs db prune --database-url {url_word(url)}"
            )
    return lines


def _margin(cap: int, least: int) -> int:
    return min(max(int(cap * FULL_SHARE), least), cap // 2)


__all__ = ["LIMITS", "StreamFullError", "full_lines", "raise_line"]
