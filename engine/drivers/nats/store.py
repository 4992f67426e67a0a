"""What every module of the driver shares: the bucket, its replica, the clock, the wake-up and
change signals, and the compare-and-set loops every write goes through.

A transition reads the value and its revision (the replica's copy first, the server's after a
conflict), computes the next value with a pure function (engine.rules), and writes it only if
the revision is still the one read; a conflict retries the whole transition from a fresh read.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import nats.js.errors
from nats.aio.client import Client
from nats.js import JetStreamContext
from nats.js.kv import KeyValue

from engine.changes import ChangeFeed
from engine.clock import Clock
from engine.driver_errors import DriverUnavailableError, StoreDamagedError
from engine.drivers.damage import UNDECODABLE, reason
from engine.drivers.nats import keys
from engine.drivers.nats.codec import JobDoc, decode_doc, encode_doc
from engine.drivers.nats.connection import (
    ConnectionLog,
    Fixes,
    TooLarge,
    storage_full,
)
from engine.drivers.nats.max_payload import HEADER_ROOM
from engine.drivers.nats.replica import Entry, Replica
from engine.rules import WAITING_STATES
from engine.wake import Waker

# A key written this often by others between our read and our write is contended beyond
# reason: fail loudly rather than spin.
MAX_CONFLICTS = 200
CONFLICT = nats.js.errors.KeyWrongLastSequenceError
WRONG_LAST_SEQUENCE = (10071, 10164)
T = TypeVar("T")


class Unchanged(Exception):
    """Raised by a change function: nothing to write, the transition answers as is."""


@dataclass
class Store:
    client: Client
    js: JetStreamContext
    kv: KeyValue
    clock: Clock
    replica: Replica
    waker: Waker
    changes: ChangeFeed
    fixes: Fixes
    log: ConnectionLog
    # When (jobs' clock) claims may take over expired leases again after an outage (claims.py).
    take_over_from: int = 0

    @classmethod
    def open(
        cls,
        client: Client,
        js: JetStreamContext,
        kv: KeyValue,
        clock: Clock,
        fixes: Fixes,
        log: ConnectionLog,
    ) -> Store:
        waker = Waker()
        changes = ChangeFeed()

        def on_job(doc: JobDoc) -> None:
            # Pushed by the server for every process's write: a waiting job wakes idle workers.
            if doc.record.state in WAITING_STATES:
                waker.notify()
            changes.notify()

        replica = Replica(kv, js, f"KV_{kv._name}", on_job, client)

        def on_other(family: str) -> None:
            if family in ("bf", "desc", "job"):
                changes.notify()

        replica.on_other = on_other
        return cls(client, js, kv, clock, replica, waker, changes, fixes, log)

    def bound(self, room: int = 0) -> int:
        """The most bytes a value may have, keeping `room` of them free for later writes."""
        return self.client.max_payload - HEADER_ROOM - room

    def check_size(self, key: str, raw: bytes, room: int = 0) -> None:
        """TooLarge when `raw` is past `bound(room)`: sent, it would fail every try."""
        bound = self.bound(room)
        if len(raw) > bound:
            raise TooLarge(key, len(raw), bound, self.client.max_payload)

    # --- single keys --------------------------------------------------------------------------

    async def fresh(self, key: str) -> Entry | None:
        """The server's current value of `key` (None when absent or deleted)."""
        held = self.replica.get(key)
        try:
            got = await self.kv.get(key)
        except nats.js.errors.KeyNotFoundError:
            if held is not None:
                # Gone, though the replica holds it: purged by another process's take-back,
                # which no watch reports. Forgotten unless a newer write arrived meanwhile.
                self.replica.purged(key, held.revision)
            return None
        assert got.revision is not None
        entry = Entry(got.revision, got.value or b"")
        self.replica.apply(key, entry.revision, entry.raw)
        return entry

    async def read(self, key: str) -> Entry | None:
        """The replica's copy, or the server's when the replica has none."""
        return self.replica.get(key) or await self.fresh(key)

    async def write(self, key: str, raw: bytes, revision: int) -> int | None:
        """Write `raw` if `key` is still at `revision` (0: if absent); None on a conflict."""
        self.check_size(key, raw)
        try:
            if revision == 0:
                new = await self.kv.create(key, raw)
            else:
                new = await self.kv.update(key, raw, last=revision)
        except CONFLICT:
            return None
        self.replica.apply(key, new, raw)
        return new

    async def delete(self, key: str, revision: int) -> bool:
        """Delete `key` if it is still at `revision`; False on a conflict."""
        try:
            await self.kv.delete(key, last=revision)
        except nats.js.errors.APIError as exc:
            # A conditional delete's conflict comes back as a plain bad request.
            if exc.err_code in WRONG_LAST_SEQUENCE:
                return False
            raise
        return True

    async def purge(self, key: str) -> None:
        """Remove `key` and its history (retention): watchers see the purge marker."""
        await self.kv.purge(key)

    async def take_back(self, key: str, revision: int) -> bool:
        """Remove our own write of `key` at `revision`; False when the key changed since (it is
        left). A delete every replica sees, or, where a full store refuses even a delete
        marker, a purge of the key's messages up to `revision` (it frees room, so a full server
        takes it; `purge_own` tells the other processes' replicas)."""
        try:
            return await self.delete(key, revision)
        except nats.js.errors.APIError as exc:
            if not storage_full(exc):
                raise
        now = await self.fresh(key)
        if now is None or now.revision != revision:
            return False
        await self.purge_own(key, revision)
        return True

    async def purge_own(self, key: str, revision: int) -> None:
        """Purge `key`'s messages up to `revision` and announce it on the replicas' notice
        subject: a core message, which a full JetStream store still carries. A process that
        misses it (disconnected then) drops the key when a read finds it gone (`fresh`)."""
        subject = f"$KV.{self.kv._name}.{key}"
        await self.js.purge_stream(self.replica.stream, subject=subject, seq=revision + 1)
        self.replica.purged(key, revision)
        await self.client.publish(self.replica.purge_subject, f"{revision} {key}".encode())

    async def change_key(self, key: str, change: Callable[[bytes | None], bytes | None]) -> None:
        """Compare-and-set `key` to `change(current)`; `change` returning None deletes it (and
        a missing key stays missing); `Unchanged` writes nothing."""
        entry = await self.read(key)
        for _ in range(MAX_CONFLICTS):
            try:
                new = change(None if entry is None else entry.raw)
            except Unchanged:
                return
            if new is None:
                if entry is None or await self.delete(key, entry.revision):
                    return
            elif await self.write(key, new, 0 if entry is None else entry.revision) is not None:
                return
            entry = await self.fresh(key)
        raise self.contended(key)

    # --- job documents ------------------------------------------------------------------------

    async def fresh_doc(self, job_id: str) -> tuple[int, JobDoc] | None:
        key = keys.job(job_id)
        entry = await self.fresh(key)
        if entry is None:
            return None
        try:
            return entry.revision, decode_doc(entry.raw)
        except UNDECODABLE as exc:
            raise self.damaged(key, exc) from exc

    async def read_doc(self, job_id: str) -> tuple[int, JobDoc] | None:
        return self.replica.doc(keys.job(job_id)) or await self.fresh_doc(job_id)

    async def write_doc(
        self, doc: JobDoc, revision: int, *, strict: bool = False, room: int = 0
    ) -> int | None:
        """Write the job document if its key is still at `revision` (0: create); None on a
        conflict. Applied to the replica at once: this process reads its own writes.

        `strict` with revision 0 expects no message at all on the key, a delete marker included
        (`kv.create` writes over one): a racer rolling a dedupe intent forward never brings
        back a job that retention removed (enqueue.py). `room`: bytes the value must leave
        free (connection.SETTLE_ROOM), else TooLarge."""
        key = keys.job(doc.record.id)
        raw = encode_doc(doc)
        self.check_size(key, raw, room)
        try:
            if revision == 0 and not strict:
                new = await self.kv.create(key, raw)
            else:
                new = await self.kv.update(key, raw, last=revision)
        except CONFLICT:
            return None
        self.replica.apply_doc(key, new, raw, doc)
        return new

    async def change_doc(
        self,
        job_id: str,
        change: Callable[[JobDoc | None], JobDoc],
        *,
        fresh: bool = False,
        room: int = 0,
    ) -> tuple[JobDoc | None, JobDoc]:
        """Compare-and-set the job's document to `change(current)` (current None when the job is
        absent: `change` raises or creates it); `Unchanged` from `change` answers the current
        document as both. Answers (before, after).

        `fresh` starts from the server's copy: after a write whose reply was lost, the replica
        may not hold it yet, and a write against its revision would be a certain conflict.
        `room` as for `write_doc`."""
        held = await (self.fresh_doc(job_id) if fresh else self.read_doc(job_id))
        for _ in range(MAX_CONFLICTS):
            current = None if held is None else held[1]
            try:
                new = change(current)
            except Unchanged:
                assert current is not None
                return current, current
            if await self.write_doc(new, 0 if held is None else held[0], room=room) is not None:
                return current, new
            held = await self.fresh_doc(job_id)
        raise self.contended(keys.job(job_id))

    def damaged(self, key: str, exc: BaseException, named: str = "") -> StoreDamagedError:
        """`key` holds a value the driver did not write (`named`: what the key is for, by the
        caller's name). Terminal: the fix shows it as stored."""
        cause = (named + ": " if named else "") + (
            f"{key} holds a value that is not what the driver writes there "
            f"({reason(exc)}); another program writes in this bucket"
        )
        return StoreDamagedError("nats", cause, self.fixes.key(key))

    def contended(self, key: str) -> DriverUnavailableError:
        """`key` changed under every compare-and-set: others write it that often. Nothing of
        the call was written, so it may be made again (retryable); the fix shows the key and
        how often it is written."""
        cause = (
            f"{key} changed under {MAX_CONFLICTS} compare-and-sets in a row (other writers); "
            "nothing of the call was written, and the same call can be made again"
        )
        return DriverUnavailableError("nats", cause, self.fixes.key(key))
