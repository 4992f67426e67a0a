"""Delete markers, purged an hour after their delete.

A KV delete writes a marker that the bucket (history 1, no age limit) keeps for good, and
every process start replays all of them: without this, the stream grows with every job ever
pruned and every dedupe key ever freed. A pass of the pruner purges each marker older than its
cutoff by `purge(subject, seq=marker + 1)`: only the marker and what came before it on that
key go, so a value written after the marker, even between the scan and the purge, stays.

Which markers are old is told by sequence, not by their server timestamps, so that the cutoff
is on the injected clock: each pass notes the stream's last sequence at its own `now` (a
mark), and a marker at or below the newest mark taken before the cutoff is older than it. The
marks (at most `MARKS_KEPT` spread over the window) and the sequence scanned up to (the
cursor) are kept in the key `tomb`, so each message is scanned once and a restarted pruner
goes on where the last one stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass

import nats.errors
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from nats.js.kv import KV_DEL, KV_PURGE

from engine.drivers.damage import or_none
from engine.drivers.nats import keys
from engine.drivers.nats.codec import dumps, loads
from engine.drivers.nats.store import Store

MARKS_KEPT = 60
FETCH_BATCH = 1_000
# A fetch of messages the consumer reported pending waits no longer than this.
FETCH_TIMEOUT_S = 5.0
CONSUMER_IDLE_S = 60.0
# The server runs purges one after another: a few in flight keep each within its timeout.
PURGES_AT_ONCE = 32
_MARKER_OPS = (KV_DEL, KV_PURGE)
_OPERATION = "KV-Operation"


@dataclass
class _Progress:
    cursor: int
    marks: list[tuple[int, int]]  # (ms on the injected clock, the stream's last sequence)
    revision: int  # of the `tomb` key, 0 when absent


async def forget(store: Store, deleted_before: int, limit: int) -> int:
    """Purge up to `limit` markers of keys deleted before `deleted_before`; how many went."""
    progress = await _load(store)
    info = await store.js.stream_info(store.replica.stream)
    _mark(progress, store.clock.now_ms(), info.state.last_seq, deleted_before)
    bound = _bound(progress, deleted_before)
    purged = 0
    if bound > progress.cursor and limit > 0:
        purged, progress.cursor = await _purge_markers(store, progress.cursor, bound, limit)
    await _save(store, progress)
    return purged


def _mark(progress: _Progress, now: int, last_seq: int, deleted_before: int) -> None:
    """Note the stream's last sequence now, spaced so that the window holds MARKS_KEPT marks."""
    spacing = max(1, (now - deleted_before) // MARKS_KEPT)
    last = progress.marks[-1] if progress.marks else None
    if last is None or (now >= last[0] + spacing and last_seq >= last[1]):
        progress.marks.append((now, last_seq))


def _bound(progress: _Progress, deleted_before: int) -> int:
    """The sequence every older marker is at or below (0: none yet), and the marks it no
    longer needs dropped: the cutoff only moves forward."""
    old = [mark for mark in progress.marks if mark[0] <= deleted_before]
    if not old:
        return 0
    progress.marks = [old[-1], *(mark for mark in progress.marks if mark[0] > deleted_before)]
    return old[-1][1]


async def _purge_markers(store: Store, cursor: int, bound: int, limit: int) -> tuple[int, int]:
    """Scan the stream after `cursor` up to `bound`, headers only, purging each marker met,
    until `limit` went; answers how many went and the sequence scanned up to."""
    stream = store.replica.stream
    config = ConsumerConfig(
        deliver_policy=DeliverPolicy.BY_START_SEQUENCE,
        opt_start_seq=cursor + 1,
        ack_policy=AckPolicy.NONE,
        headers_only=True,
        # A scan that dies with its process leaves no consumer on the server for long.
        inactive_threshold=CONSUMER_IDLE_S,
    )
    # A pull consumer: its pending count is what is left to read, none sent ahead.
    sub = await store.js.pull_subscribe(f"$KV.{store.kv._name}.>", stream=stream, config=config)
    markers: list[tuple[str, int]] = []
    scanned = cursor
    try:
        pending = (await sub.consumer_info()).num_pending or 0
        while pending > 0 and len(markers) < limit:
            for msg in await sub.fetch(min(pending, FETCH_BATCH), timeout=FETCH_TIMEOUT_S):
                seq = msg.metadata.sequence.stream
                pending = msg.metadata.num_pending or 0
                if seq > bound:
                    pending = 0
                    break
                scanned = seq
                if (msg.headers or {}).get(_OPERATION) in _MARKER_OPS:
                    markers.append((msg.subject, seq))
                    if len(markers) == limit:
                        break
        if pending == 0:
            scanned = bound  # the stream holds nothing more at or below the bound
    except nats.errors.TimeoutError:
        pass  # the next pass scans on from `scanned`
    finally:
        with contextlib.suppress(Exception):
            await sub.unsubscribe()
        if config.name is not None:  # named by pull_subscribe
            with contextlib.suppress(Exception):
                await store.js.delete_consumer(stream, config.name)
    for lo in range(0, len(markers), PURGES_AT_ONCE):
        await asyncio.gather(
            *(
                store.js.purge_stream(stream, subject=subject, seq=seq + 1)
                for subject, seq in markers[lo : lo + PURGES_AT_ONCE]
            )
        )
    return len(markers), scanned


async def _load(store: Store) -> _Progress:
    entry = await store.fresh(keys.TOMBSTONES)
    if entry is None:
        return _Progress(cursor=0, marks=[], revision=0)
    # A record another program wrote is none: this pass scans from the start and writes it anew.
    read = or_none(lambda: _read(entry.raw), f"the pruner's record {keys.TOMBSTONES!r}")
    cursor, marks = read or (0, [])
    return _Progress(cursor=cursor, marks=marks, revision=entry.revision)


def _read(raw: bytes) -> tuple[int, list[tuple[int, int]]]:
    data = loads(raw)
    return int(data["cursor"]), [(int(ms), int(seq)) for ms, seq in data["marks"]]


async def _save(store: Store, progress: _Progress) -> None:
    raw = dumps({"cursor": progress.cursor, "marks": [list(mark) for mark in progress.marks]})
    # A conflict is a second pruner's pass (a lease that changed hands mid-pass): its record
    # stands, and this pass's purges were safe either way.
    await store.write(keys.TOMBSTONES, raw, progress.revision)
