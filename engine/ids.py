"""Identifiers. Job ids sort by creation time, so `id` breaks `run_at` ties in a total order."""

from __future__ import annotations

import os
import secrets
import threading
import time

# The stamp of the last id made: ms << 16 | a 16-bit in-process sequence. One number, so the
# sequence carries into the ms on overflow by plain addition.
_stamp = 0
# Random hex digits drawn from the OS a page at a time: one syscall per 512 ids instead of one
# each, and one hex conversion per page instead of one per id.
_RANDOM_PAGE = 4096
_random = ""
_random_at = 0
_lock = threading.Lock()
# What 48 bits of ms hold (the year 10889): a test clock past it would make ids too long.
_MS_CAP = 1 << 48


def _forget_random() -> None:
    # A forked child must not replay its parent's unread bytes: same ms + same bytes = same id.
    # A fresh lock too: a thread of the parent may have held it at the fork.
    global _random, _random_at, _stamp, _lock
    _random, _random_at, _stamp = "", 0, 0
    _lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_random)


def new_id() -> str:
    """A 32-hex-digit id: 48 bits of wall-clock ms, a 16-bit in-process sequence, 64 random bits."""
    (one,) = new_ids(1)
    return one


def new_ids(count: int, at_ms: int | None = None) -> list[str]:
    """`count` ids in creation order, exactly as `new_id` would make them one by one, for one
    reading of the clock: a batch enqueue needs two per job. `at_ms`: the instant they are made
    at (a job's `created_at`, read as the server reads time, so jobs enqueued on many machines
    list in the order they were made), else (or past what 48 bits hold) this machine's wall
    clock. Within a process ids only grow, whatever `at_ms` says."""
    global _stamp, _random, _random_at
    with _lock:  # threads share the stamp and the random page
        # A new ms starts at sequence 0; within one ms (or after the clock stepped back) the
        # sequence goes on from the last id.
        stamp = _stamp + 1
        ms = at_ms if at_ms is not None and 0 <= at_ms < _MS_CAP else time.time_ns() // 1_000_000
        now = ms << 16
        if now > stamp:
            stamp = now
        page, at = _random, _random_at
        if at + 16 * count > len(page):
            page, at = os.urandom(max(_RANDOM_PAGE, 8 * count)).hex(), 0
        ids: list[str] = []
        for _ in range(count):
            ids.append(f"{stamp:016x}{page[at : at + 16]}")
            stamp += 1
            at += 16
        _stamp, _random, _random_at = stamp - 1, page, at
    return ids


def new_token() -> str:
    return secrets.token_hex(16)


def worker_id() -> str:
    return f"{os.uname().nodename}:{os.getpid()}:{secrets.token_hex(3)}"
