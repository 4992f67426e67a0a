"""Identifiers. Job ids sort by creation time, so `id` breaks `run_at` ties in a total order."""

from __future__ import annotations

import os
import secrets
import threading
import time

_last_ms = 0
_seq = 0
# Random hex digits drawn from the OS a page at a time: one syscall per 512 ids instead of one
# each, and one hex conversion per page instead of one per id.
_RANDOM_PAGE = 4096
_random = ""
_random_at = 0
_lock = threading.Lock()


def _forget_random() -> None:
    # A forked child must not replay its parent's unread bytes: same ms + same bytes = same id.
    # A fresh lock too: a thread of the parent may have held it at the fork.
    global _random, _random_at, _last_ms, _seq, _lock
    _random, _random_at, _last_ms, _seq = "", 0, 0, 0
    _lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_random)


def new_id() -> str:
    """A 32-hex-digit id: 48 bits of wall-clock ms, a 16-bit in-process sequence, 64 random bits.

    Wall-clock (not the injected clock) on purpose: ids only need to be unique and roughly
    ordered, and a frozen test clock would otherwise collapse the ordering to the sequence.
    """
    (one,) = new_ids(1)
    return one


def new_ids(count: int) -> list[str]:
    """`count` ids in creation order, exactly as `new_id` would make them one by one, for one
    reading of the clock: a batch enqueue needs two per job."""
    global _last_ms, _seq, _random, _random_at
    ids: list[str] = []
    with _lock:  # threads share the sequence and the random page
        # Locals in the loop, module state written back once: this runs twice per job.
        last, seq, page, at = _last_ms, _seq, _random, _random_at
        now_ms = time.time_ns() // 1_000_000
        for _ in range(count):
            if now_ms > last:
                last, seq = now_ms, 0
            else:
                seq = (seq + 1) & 0xFFFF
                if seq == 0:
                    last += 1
            if at >= len(page):
                page, at = os.urandom(_RANDOM_PAGE).hex(), 0
            # ms and sequence as one 64-bit number: one conversion to hex per id.
            ids.append(f"{last << 16 | seq:016x}{page[at : at + 16]}")
            at += 16
        _last_ms, _seq, _random, _random_at = last, seq, page, at
    return ids


def new_token() -> str:
    return secrets.token_hex(16)


def worker_id() -> str:
    return f"{os.uname().nodename}:{os.getpid()}:{secrets.token_hex(3)}"
