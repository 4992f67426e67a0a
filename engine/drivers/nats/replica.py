"""A local, server-fed copy of the bucket: the ordered views claims and reads walk.

NATS KV has no secondary indexes and no server-side ordering by a computed rank, so each driver
keeps a replica of the bucket fed by a KV watch: the server pushes every write (ours and other
processes') in stream order, and the replica indexes what it holds — live jobs for claims
(sorted by `rules.claim_rank` at claim time), run ids for steps, each key family for listing.

The replica is a view, never the truth: every write is a compare-and-set against the revision
the replica (or a fresh server read, after a conflict) holds, so a stale view costs a retry,
never a lost update. A read that must see everything committed so far calls `sync()`: it asks
the stream for its last sequence and waits until the watch has delivered it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterator
from typing import NamedTuple

from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.js import JetStreamContext
from nats.js.kv import KV_DEL, KV_PURGE, KeyValue

from engine.drivers.damage import UNDECODABLE, reason
from engine.drivers.nats import keys
from engine.drivers.nats.codec import JobDoc, decode_doc
from engine.errors import JobsError
from engine.rules import LIVE_STATES

logger = logging.getLogger(__name__)

SYNC_TIMEOUT_S = 15.0
STALL_S = 1.0
GONE_KEPT = 10_000
PURGE_SUBJECT_PREFIX = "mcp_jobs.purged"


class Entry(NamedTuple):
    revision: int
    raw: bytes


class Replica:
    def __init__(
        self,
        kv: KeyValue,
        js: JetStreamContext,
        stream: str,
        on_job: Callable[[JobDoc], None],
        client: Client | None = None,
    ) -> None:
        self._kv = kv
        self._js = js
        self._stream = stream
        # Where purge notices are heard (Store.purge_own): None, none are.
        self._client = client
        self._notices: Subscription | None = None
        self._on_job = on_job
        self.on_other: Callable[[str], None] = lambda family: None
        # family -> key -> entry; deleted keys are kept as a revision so that an older write of
        # ours applied late cannot bring them back.
        self._families: dict[str, dict[str, Entry]] = {}
        self._gone: dict[str, int] = {}
        self._docs: dict[str, tuple[int, JobDoc]] = {}
        # Job keys holding a value that is not a job document, with why: an unfiltered list
        # names them (reads.list_jobs).
        self.unreadable: dict[str, BaseException] = {}
        self.live: dict[str, JobDoc] = {}
        self._runs: dict[str, str] = {}  # run id -> job key
        self.seq = 0
        self._moved = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._watcher: KeyValue.KeyWatcher | None = None

    @property
    def stream(self) -> str:
        """The bucket's stream (`KV_<bucket>`)."""
        return self._stream

    @property
    def purge_subject(self) -> str:
        """The core NATS subject a process announces its purges on: no watch reports a purge."""
        return f"{PURGE_SUBJECT_PREFIX}.{self._stream}"

    async def start(self) -> None:
        if self._client is not None:
            self._notices = await self._client.subscribe(self.purge_subject, cb=self._on_notice)
        self._watcher = await self._kv.watchall()
        self._task = asyncio.create_task(self._follow(self._watcher))

    async def _on_notice(self, msg: Msg) -> None:
        revision, _, key = msg.data.decode("utf-8", "replace").partition(" ")
        if revision.isdigit() and key:
            self.purged(key, int(revision))

    async def stop(self) -> None:
        if self._notices is not None:
            with contextlib.suppress(Exception):
                await self._notices.unsubscribe()
        if self._watcher is not None:
            with contextlib.suppress(Exception):
                await self._watcher.stop()  # type: ignore[no-untyped-call]
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task

    async def _follow(self, watcher: KeyValue.KeyWatcher) -> None:
        async for entry in watcher:
            if entry is None or entry.revision is None:
                continue
            deleted = entry.operation in (KV_DEL, KV_PURGE)
            self.apply(entry.key, entry.revision, None if deleted else (entry.value or b""))
            if entry.revision > self.seq:
                self.seq = entry.revision
                self._moved.set()

    async def restart(self) -> None:
        """Follow the bucket again from a new watch: it replays the last value (or delete
        marker) of every key, so nothing missed while the old one stalled stays missed."""
        old = self._watcher
        self._watcher = await self._kv.watchall()
        if old is not None:
            with contextlib.suppress(Exception):
                await old.stop()  # type: ignore[no-untyped-call]
        if self._task is not None:
            self._task.cancel()
        self._task = asyncio.create_task(self._follow(self._watcher))

    async def sync(self) -> None:
        """Wait until every write the stream held when this was called has been applied.

        A watch whose consumer died with a server or cluster node stops moving; nats-py resets
        it only after missed heartbeats, so a watch that has not moved for STALL_S is
        restarted here at once."""
        info = await self._js.stream_info(self._stream)
        target = info.state.last_seq
        async with asyncio.timeout(SYNC_TIMEOUT_S):
            while self.seq < target:
                before = self.seq
                self._moved.clear()
                try:
                    async with asyncio.timeout(STALL_S):
                        await self._moved.wait()
                except TimeoutError:
                    if self.seq == before:
                        await self.restart()

    # --- applying writes ----------------------------------------------------------------------

    def apply(self, key: str, revision: int, raw: bytes | None) -> None:
        """Take the value `key` has at `revision` (None: deleted), unless a newer one is held."""
        family = keys.family(key)
        held = self._families.get(family, {}).get(key)
        if (held is not None and held.revision >= revision) or self._gone.get(key, 0) >= revision:
            return
        if raw is None:
            self._families.get(family, {}).pop(key, None)
            self._gone[key] = revision
            # Twice the bound: a filter leaves at most GONE_KEPT (revisions are distinct), so
            # a burst of deletes (a prune pass, a replay) filters once per GONE_KEPT, not each.
            if len(self._gone) > 2 * GONE_KEPT:
                self._forget_old_deletes()
            if family == "job":
                self._forget_doc(key)
            self.on_other(family)
            return
        self._gone.pop(key, None)
        self._families.setdefault(family, {})[key] = Entry(revision, raw)
        if family != "job":
            self.on_other(family)
            return
        try:
            doc = decode_doc(raw)
        except (*UNDECODABLE, JobsError) as exc:
            # Not a document the driver wrote. Left out of the views (claims and lists go on
            # without it); a read of the job goes to the server and fails typed there
            # (Store.fresh_doc), and the watch, which the failure would end, follows on.
            self._forget_doc(key)
            self.unreadable[key] = exc
            logger.warning(
                "nats: %s at revision %d is not a job document: %s", key, revision, reason(exc)
            )
            return
        self._remember_doc(key, revision, doc)

    def purged(self, key: str, revision: int) -> None:
        """`key`'s messages up to `revision` were purged, which no watch reports: forget what is
        held of it up to there as a delete at that revision would, so that a later write still
        lands and a late copy of a purged one is not taken."""
        held = self.get(key)
        if held is not None and held.revision <= revision:
            self._families[keys.family(key)].pop(key)
        self.apply(key, revision, None)

    def _forget_old_deletes(self) -> None:
        # A late write of ours is at most the writes in flight behind the watch: a delete the
        # watch passed GONE_KEPT sequences ago can no longer be undone by one.
        floor = self.seq - GONE_KEPT
        self._gone = {k: r for k, r in self._gone.items() if r > floor}

    def apply_doc(self, key: str, revision: int, raw: bytes, doc: JobDoc) -> None:
        """Our own write of a job document (already decoded): read-your-writes without a parse."""
        held = self._families.get("job", {}).get(key)
        if (held is not None and held.revision >= revision) or self._gone.get(key, 0) >= revision:
            return
        self._gone.pop(key, None)
        self._families.setdefault("job", {})[key] = Entry(revision, raw)
        self._remember_doc(key, revision, doc)

    def _remember_doc(self, key: str, revision: int, doc: JobDoc) -> None:
        self._docs[key] = (revision, doc)
        self.unreadable.pop(key, None)
        if doc.record.state in LIVE_STATES:
            self.live[key] = doc
        else:
            self.live.pop(key, None)
        for run_id in (doc.record.run_id, *doc.steps):
            self._runs[run_id] = key
        self._on_job(doc)

    def _forget_doc(self, key: str) -> None:
        self.unreadable.pop(key, None)
        held = self._docs.pop(key, None)
        self.live.pop(key, None)
        if held is not None:
            for run_id in (held[1].record.run_id, *held[1].steps):
                if self._runs.get(run_id) == key:
                    del self._runs[run_id]

    # --- reading ------------------------------------------------------------------------------

    def get(self, key: str) -> Entry | None:
        return self._families.get(keys.family(key), {}).get(key)

    def doc(self, key: str) -> tuple[int, JobDoc] | None:
        return self._docs.get(key)

    def docs(self) -> Iterator[tuple[int, JobDoc]]:
        return iter(list(self._docs.values()))

    def family(self, name: str) -> list[tuple[str, Entry]]:
        return sorted(self._families.get(name, {}).items())

    def family_unordered(self, name: str) -> list[tuple[str, Entry]]:
        """`family` without the sort, for a reader that orders what it keeps itself."""
        return list(self._families.get(name, {}).items())

    def job_of_run(self, run_id: str) -> str | None:
        return self._runs.get(run_id)
