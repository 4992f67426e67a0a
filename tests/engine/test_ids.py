"""Ids: unique, ordered by creation within a process, and never repeated across a fork."""

from __future__ import annotations

import os
import sys
import threading
import time

import pytest

from engine.ids import new_id, new_ids


def test_ids_are_unique_and_sort_in_creation_order() -> None:
    ids = [new_id() for _ in range(20_000)]
    assert len(set(ids)) == len(ids)
    assert ids == sorted(ids)
    assert all(len(i) == 32 and int(i, 16) >= 0 for i in ids)


def test_a_forked_child_does_not_replay_the_parents_random_bytes() -> None:
    new_id()  # the parent now holds a page of unread random bytes
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report its next ids and leave without running pytest's exit
        os.close(read)
        os.write(write, ",".join(new_id() for _ in range(50)).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        child = pipe.read().split(",")
    os.waitpid(pid, 0)
    parent = [new_id() for _ in range(50)]
    # Same millisecond and sequence are possible in two processes; the random part must differ.
    assert len(child) == 50
    assert not {c[16:] for c in child} & {p[16:] for p in parent}


def test_ids_made_in_batches_keep_the_order_and_uniqueness_of_ids_made_one_by_one() -> None:
    ids = new_ids(70_000) + [new_id() for _ in range(500)] + new_ids(3) + new_ids(70_000)
    assert len(set(ids)) == len(ids)
    assert ids == sorted(ids)  # 70,000 in one ms overflow the 16-bit sequence: ms moves on
    assert all(len(i) == 32 and int(i, 16) >= 0 for i in ids)


def test_threads_drawing_ids_at_once_never_share_one(monkeypatch: pytest.MonkeyPatch) -> None:
    # One frozen millisecond and a thread switch every microsecond: without the lock, two
    # threads read the same sequence and random position and hand out the same ids.
    monkeypatch.setattr(time, "time_ns", lambda: 1_767_225_600_000_000_000)
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    drawn: list[list[str]] = []
    try:
        threads = [threading.Thread(target=lambda: drawn.append(new_ids(5_000))) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
    finally:
        sys.setswitchinterval(interval)
    every = [i for batch in drawn for i in batch]
    assert len(drawn) == 4 and len(set(every)) == len(every) == 20_000


def _ms(job_id: str) -> int:
    return int(job_id[:16], 16) >> 16


def test_ids_made_at_an_instant_carry_it_and_still_only_grow() -> None:
    # A job's id is made at its created_at, as the server reads time: a machine whose own
    # clock is two minutes off still lists its jobs in the order they were made.
    # Ahead of every id this process made already (a test on a clock set ahead may have).
    later = max(time.time_ns() // 1_000_000, _ms(new_id())) + 1_000
    first = new_ids(2, later)
    assert [_ms(i) for i in first] == [later, later]
    earlier = new_ids(3, later - 120_000)  # an instant before the last: the sequence goes on
    assert first + earlier == sorted(first + earlier)
    assert _ms(earlier[-1]) == later


def test_an_instant_past_what_48_bits_hold_is_read_from_the_wall_clock() -> None:
    for wild in (1 << 48, 1 << 62, -5):
        (made,) = new_ids(1, wild)
        assert len(made) == 32 and _ms(made) < 1 << 48
