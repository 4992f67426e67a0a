"""The replica's memory of deleted keys: a late write of ours never brings a recent delete
back, and a burst of deletes (a prune pass of many jobs, a process replaying a bucket that
holds them) costs each delete O(1), not a walk of every delete it remembers."""

from __future__ import annotations

import pytest

pytest.importorskip("nats", reason="the nats extra is not installed")

from engine.drivers.nats import replica as replica_module
from engine.drivers.nats.replica import GONE_KEPT, Replica


def _replica() -> Replica:
    # Only apply() runs here: no watch, no server.
    return Replica(None, None, "KV_test", on_job=lambda doc: None)  # type: ignore[arg-type]


def test_a_burst_of_deletes_walks_the_remembered_ones_once_per_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    replica = _replica()
    walks: list[int] = []
    forget = Replica._forget_old_deletes

    def counted(self: Replica) -> None:
        walks.append(len(self._gone))
        forget(self)

    monkeypatch.setattr(replica_module.Replica, "_forget_old_deletes", counted)
    deletes = 4 * GONE_KEPT
    for revision in range(1, deletes + 1):
        replica.apply(f"x.{revision}", revision, None)
        replica.seq = revision
    assert len(walks) <= deletes // GONE_KEPT
    assert len(replica._gone) <= 2 * GONE_KEPT


def test_a_late_write_never_brings_back_a_delete_the_watch_passed_lately() -> None:
    replica = _replica()
    replica.apply("x.kept", 5, b"v")
    replica.apply("x.kept", 6, None)
    for revision in range(7, 7 + 3 * GONE_KEPT):
        replica.apply(f"x.{revision}", revision, None)
        replica.seq = revision
        if revision - 6 < GONE_KEPT:
            replica.apply("x.kept", 5, b"v")  # our own write, applied after its delete
            assert replica.get("x.kept") is None
