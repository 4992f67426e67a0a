"""Ids: unique, ordered by creation within a process, and never repeated across a fork."""

from __future__ import annotations

import os

from engine.ids import new_id


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
