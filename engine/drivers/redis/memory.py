"""The server's memory against its `maxmemory`: whether it is full, and the lines that say what
to do about it (raise the limit, or prune settled jobs), for STORAGE_FULL's fix and `db report`.
The line that raises the limit runs `CONFIG SET` through redis-py, with the Python mcp-jobs runs
on: redis-cli is seldom installed where the application runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from engine.drivers.python_lines import package_line
from engine.drivers.urls import url_word

_MB = 1024 * 1024
# How near `maxmemory` counts as full: a write refused at the limit leaves the server a little
# under it once the refused command's buffers are freed, and the next such write is refused too.
FULL_SHARE = 0.05
FULL_MIN_BYTES = 256 * 1024
# Sets maxmemory to argv[2] on the server of the URL argv[1] (its `?prefix=` is the driver's).
_SET_MAXMEMORY = (
    "import sys, redis; from engine.drivers.redis.connection import split_prefix; "
    "r = redis.Redis.from_url(split_prefix(sys.argv[1])[0], decode_responses=True); "
    'r.config_set("maxmemory", sys.argv[2]); '
    'print("maxmemory", r.config_get("maxmemory")["maxmemory"])'
)


@dataclass(frozen=True)
class Memory:
    """What `INFO memory` says: bytes used, the `maxmemory` limit (0: none), and both as the
    server prints them."""

    used: int
    limit: int
    used_human: str
    limit_human: str

    @classmethod
    def of(cls, info: Mapping[str, Any]) -> Memory:
        return cls(
            int(info.get("used_memory", 0)),
            int(info.get("maxmemory", 0)),
            str(info.get("used_memory_human", "?")),
            str(info.get("maxmemory_human", "?")),
        )

    @property
    def full(self) -> bool:
        """At or near the limit (`FULL_SHARE`): under `noeviction` the server refuses writes
        there (STORAGE_FULL)."""
        margin = max(int(self.limit * FULL_SHARE), FULL_MIN_BYTES)
        return self.limit > 0 and self.used >= self.limit - margin

    def used_line(self) -> str:
        return f"{self.used_human} used of maxmemory {self.limit_human}"

    def bigger(self) -> str:
        """Twice the limit (or what is used, when that is more), in whole megabytes."""
        return f"{-(-2 * max(self.used, self.limit) // _MB)}mb"

    def raise_line(self, url: str) -> str:
        """The command that sets maxmemory to `bigger()` (CONFIG SET: until the server
        restarts, unless its configuration file says the same)."""
        return package_line(_SET_MAXMEMORY, url_word(url), self.bigger())


def prune_line(url: str) -> str:
    """The command that deletes the settled jobs past their retention, which frees memory."""
    return f"mcp-jobs db prune --database-url {url_word(url)}"


__all__ = ["Memory", "prune_line"]
