"""Identifiers. Job ids sort by creation time, so `id` breaks `run_at` ties in a total order."""

from __future__ import annotations

import os
import secrets
import time

_last_ms = 0
_seq = 0
# Random hex digits drawn from the OS a page at a time: one syscall per 512 ids instead of one
# each, and one hex conversion per page instead of one per id.
_RANDOM_PAGE = 4096
_random = ""
_random_at = 0


def _forget_random() -> None:
    # A forked child must not replay its parent's unread bytes: same ms + same bytes = same id.
    global _random, _random_at, _last_ms, _seq
    _random, _random_at, _last_ms, _seq = "", 0, 0, 0


os.register_at_fork(after_in_child=_forget_random)


def new_id() -> str:
    """A 32-hex-digit id: 48 bits of wall-clock ms, a 16-bit in-process sequence, 64 random bits.

    Wall-clock (not the injected clock) on purpose: ids only need to be unique and roughly
    ordered, and a frozen test clock would otherwise collapse the ordering to the sequence.
    """
    global _last_ms, _seq, _random, _random_at
    ms = time.time_ns() // 1_000_000
    if ms <= _last_ms:
        _seq = (_seq + 1) & 0xFFFF
        if _seq == 0:
            _last_ms += 1
        ms = _last_ms
    else:
        _last_ms, _seq = ms, 0
    if _random_at >= len(_random):
        _random, _random_at = os.urandom(_RANDOM_PAGE).hex(), 0
    noise = _random[_random_at : _random_at + 16]
    _random_at += 16
    return f"{ms:012x}{_seq:04x}{noise}"


def new_token() -> str:
    return secrets.token_hex(16)


def worker_id() -> str:
    return f"{os.uname().nodename}:{os.getpid()}:{secrets.token_hex(3)}"
