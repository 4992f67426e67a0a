"""Identifiers. Job ids sort by creation time, so `id` breaks `run_at` ties in a total order."""

from __future__ import annotations

import os
import secrets
import time

_last_ms = 0
_seq = 0


def new_id() -> str:
    """A 32-hex-digit id: 48 bits of wall-clock ms, a 16-bit in-process sequence, 64 random bits.

    Wall-clock (not the injected clock) on purpose: ids only need to be unique and roughly
    ordered, and a frozen test clock would otherwise collapse the ordering to the sequence.
    """
    global _last_ms, _seq
    ms = time.time_ns() // 1_000_000
    if ms <= _last_ms:
        _seq = (_seq + 1) & 0xFFFF
        if _seq == 0:
            _last_ms += 1
        ms = _last_ms
    else:
        _last_ms, _seq = ms, 0
    return f"{ms:012x}{_seq:04x}{secrets.randbits(64):016x}"


def new_token() -> str:
    return secrets.token_hex(16)


def worker_id() -> str:
    return f"{os.uname().nodename}:{os.getpid()}:{secrets.token_hex(3)}"
