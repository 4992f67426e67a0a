"""The outbox over NATS: rows staged in a `NatsTransaction`, written when it commits.

What it can promise: rows staged in one transaction are written when the application commits
it (`await tx.commit()`), each row a create-only key, and none if it is never committed. A row
is claimed and released by compare-and-set, and published at least once: the relay enqueues
the row's request (its job id is fixed when staged, so a second publication answers the job
the first one made, never a second job) and then marks the row published by CAS, first writer
wins. What it cannot: NATS has no transaction shared with the application's database, so
staging is not atomic with the application's own writes (SQL or otherwise), and a crash in the
middle of a commit can leave a prefix of its rows staged.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.drivers.damage import readable
from engine.drivers.nats import keys
from engine.drivers.nats.codec import dumps, loads
from engine.drivers.nats.enqueue import enqueue
from engine.drivers.nats.replica import Entry
from engine.drivers.nats.store import Store, Unchanged
from engine.ids import new_ids
from engine.outbox_errors import OutboxNoTxError, OutboxTxKindError
from schemas.jobs import EnqueueRequest, EnqueueResult
from schemas.outbox import OutboxRow, OutboxWaiting

# How to stage through this driver: the fix of a value that is no transaction, or none open.
STAGE_LINE = "tx = jobs.driver.transaction(); await jobs.stage(tx, name, input); await tx.commit()"


@dataclass
class NatsTransaction:
    """The application's batch of outbox rows; `commit` writes them, `rollback` drops them."""

    store: Store
    staged: list[OutboxRow] = field(default_factory=list[OutboxRow])
    open: bool = True

    async def commit(self) -> None:
        self.open = False
        for row in self.staged:
            await self.store.write(keys.outbox(row.id), _raw(row), 0)
        self.staged.clear()

    def rollback(self) -> None:
        self.open = False
        self.staged.clear()


def _raw(row: OutboxRow) -> bytes:
    data = row.model_dump(mode="json", exclude={"request"})
    data["request"] = row.request.to_json()
    return dumps(data)


def _row(raw: bytes) -> OutboxRow:
    data = loads(raw)
    data["request"] = EnqueueRequest.from_json(data["request"])
    return OutboxRow.model_validate(data)


def _keyed_row(pair: tuple[str, Entry]) -> tuple[str, int, OutboxRow]:
    return pair[0], pair[1].revision, _row(pair[1].raw)


def stage(store: Store, tx: Any, requests: Sequence[EnqueueRequest]) -> list[str]:
    if not isinstance(tx, NatsTransaction):
        raise OutboxTxKindError(
            "nats",
            tx,
            "a NatsTransaction from `jobs.driver.transaction()`",
            STAGE_LINE,
        )
    if not tx.open:
        raise OutboxNoTxError("nats", STAGE_LINE)
    now = store.clock.now_ms()
    ids: list[str] = []
    for request, row_id in zip(requests, new_ids(len(requests), now), strict=True):
        row = OutboxRow(id=row_id, staged_at=now, request=request)
        tx.staged.append(row)
        ids.append(row.id)
    return ids


# How an unpublished row's stored JSON says so (`_raw`: compact, the request a string inside,
# so its own quotes are escaped): a claim decodes only the rows that hold this, not the week of
# published rows beside them.
_UNPUBLISHED = b'"published_at":null'


async def claim(store: Store, token: str, limit: int, lease_ms: int) -> list[OutboxRow]:
    await store.replica.sync()
    now = store.clock.now_ms()
    unpublished = [p for p in store.replica.family_unordered("ob") if _UNPUBLISHED in p[1].raw]
    # A row another program wrote is passed over at every claim (logged once); the others go on.
    found = readable(unpublished, _keyed_row, lambda pair: f"outbox row key {pair[0]!r}")
    free = [
        (key, revision, row)
        for key, revision, row in found
        if row.published_at is None
        and (row.claim_expires_at is None or row.claim_expires_at <= now)
    ]
    free.sort(key=lambda t: (t[2].staged_at, t[2].id))
    taken: list[OutboxRow] = []
    for key, revision, row in free:
        if len(taken) >= limit:
            break
        claimed = row.model_copy(update={"claimed_by": token, "claim_expires_at": now + lease_ms})
        if await store.write(key, _raw(claimed), revision) is not None:
            taken.append(claimed)
    return taken


async def publish(store: Store, token: str, rows: Sequence[OutboxRow]) -> list[EnqueueResult]:
    owned: list[OutboxRow] = []
    for row in rows:
        entry = await store.fresh(keys.outbox(row.id))
        if entry is None:
            continue
        current = _row(entry.raw)
        if current.claimed_by == token and current.published_at is None:
            owned.append(current)
    if not owned:
        return []
    now = store.clock.now_ms()
    results = await enqueue(store, [r.request for r in owned], now)
    for row, result in zip(owned, results, strict=True):

        def mark(raw: bytes | None, job_id: str = result.id) -> bytes:
            if raw is None:
                raise Unchanged
            current = _row(raw)
            if current.published_at is not None:
                raise Unchanged  # first writer wins
            return _raw(current.model_copy(update={"published_at": now, "job_id": job_id}))

        await store.change_key(keys.outbox(row.id), mark)
    return results


async def waiting(store: Store, limit: int) -> OutboxWaiting:
    """The rows a claim would look at (published ones passed over undecoded), counted."""
    await store.replica.sync()
    unpublished = [p for p in store.replica.family_unordered("ob") if _UNPUBLISHED in p[1].raw]
    found = readable(unpublished, _keyed_row, lambda pair: f"outbox row key {pair[0]!r}")
    staged = [row.staged_at for _, _, row in found if row.published_at is None]
    return OutboxWaiting(count=min(len(staged), limit), oldest_staged_at=min(staged, default=None))


async def forget_published(store: Store, published_before: int, limit: int) -> int:
    await store.replica.sync()
    done = sorted(
        (row.published_at, key, entry.revision)
        for key, entry in store.replica.family_unordered("ob")
        if _UNPUBLISHED not in entry.raw
        and (row := _row(entry.raw)).published_at is not None
        and row.published_at < published_before
    )[:limit]
    # By revision: a row written since (none is, once published) is left for the next pass.
    return sum([await store.delete(key, revision) for _, key, revision in done])


async def release(store: Store, token: str, ids: Sequence[str]) -> None:
    for row_id in ids:

        def free(raw: bytes | None) -> bytes:
            if raw is None:
                raise Unchanged
            row = _row(raw)
            if row.claimed_by != token or row.published_at is not None:
                raise Unchanged
            return _raw(row.model_copy(update={"claimed_by": None, "claim_expires_at": None}))

        await store.change_key(keys.outbox(row_id), free)
