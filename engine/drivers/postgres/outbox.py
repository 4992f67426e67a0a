"""The transactional outbox over PostgreSQL: stage through the application's own transaction,
then a relay claims, publishes (enqueues) and stamps the rows.

A claim or a publish the server rolled back is run again (`Connections.atomic`); a stage is not,
since the transaction rolled back is the application's, which only the application can rerun."""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any

import asyncpg
import asyncpg.exceptions as pgx

from engine.drivers.app_connections import (
    is_sqlalchemy_async,
    raw_connection_fix,
    sqlalchemy_kind,
)
from engine.drivers.damage import readable
from engine.drivers.postgres import rows
from engine.drivers.postgres.connections import Connections
from engine.drivers.postgres.enqueue import Enqueuer
from engine.drivers.postgres.schema_version import Conn
from engine.drivers.postgres.sql import check_schema_name
from engine.drivers.urls import without_password
from engine.errors import JobsError
from engine.ids import new_ids
from engine.outbox_errors import OutboxNoTxError, OutboxTxKindError, OutboxWrongDatabaseError
from schemas.jobs import EnqueueRequest, EnqueueResult
from schemas.outbox import OutboxRow, OutboxWaiting

# What the stage's fix runs, in a transaction of its own: the app's write goes in it too.
_STAGE_AFTER = "await jobs.stage(conn, name, input)"
_STAGE_IN_TX = f"async with conn.transaction(): {_STAGE_AFTER}"


class OutboxTxFailedError(JobsError):
    """The application's transaction was aborted by a statement that failed in it before the
    stage: the server refuses every statement until it ends, so no retry of the stage can
    succeed; only the application can roll back and run its transaction again."""

    code = "OUTBOX_TX_FAILED"
    title = "outbox staging was given a transaction that had already failed"

    def __init__(self, refused: BaseException) -> None:
        super().__init__(
            "postgres: stage() was given a connection whose transaction had already failed: a "
            "statement in it raised before the stage, and PostgreSQL refuses every statement "
            f"until the transaction ends (SQLSTATE 25P02: {str(refused).strip()}); the earlier "
            "error is the one the application caught inside the transaction (asyncpg does not "
            "keep it). Nothing was staged and retrying the stage cannot help: roll the "
            "transaction back (let the exception leave `async with conn.transaction():`) and run "
            "it again whole, the application's write with the stage; a statement that may fail "
            "belongs in a savepoint (a nested `async with conn.transaction():`), which leaves "
            "the outer transaction usable",
            _STAGE_IN_TX,
            details={"driver": "postgres", "sqlstate": "25P02"},
        )


async def stage(
    db: Connections, tx: Any, requests: Sequence[EnqueueRequest], now: int
) -> list[str]:
    """Stage through the application's own connection `tx`, which must be inside a
    transaction: the jobs then exist exactly when the application's write commits."""
    # isinstance() also accepts a pool's connection proxy (asyncpg's metaclass says so).
    if not isinstance(tx, asyncpg.Connection):
        raise _not_a_connection(db, tx)
    if not tx.is_in_transaction():
        raise OutboxNoTxError("postgres")
    ids = new_ids(len(requests), now)  # the injected clock's instant, as job ids are
    if not ids:
        return []
    async with db.guard():
        try:
            await _same_database(db, tx)
            await tx.execute(db.q["outbox_stage"], now, ids, [r.to_json() for r in requests])
        except pgx.InFailedSQLTransactionError as exc:
            # The app's own transaction refused it, not the server: no retry helps.
            raise OutboxTxFailedError(exc) from exc
    return ids


def _not_a_connection(db: Connections, tx: object) -> OutboxTxKindError:
    """A SQLAlchemy async connection or session is mended by the asyncpg connection under it,
    inside its own transaction; a pool by a connection acquired from it; anything else by one
    to the jobs' database (one line that runs in an async function)."""
    takes = "an asyncpg connection inside `async with conn.transaction():`"
    kind = sqlalchemy_kind(tx)
    if kind is not None and is_sqlalchemy_async(kind):
        note = (
            f"a SQLAlchemy {kind} on postgresql+asyncpg:// holds one (`raw.driver_connection`), "
            "inside the transaction it has open once its first statement ran: stage through "
            "it, after the application's write, and both commit together"
        )
        return OutboxNotAsyncpgError(tx, takes, raw_connection_fix(kind), note)
    if isinstance(tx, asyncpg.Pool):
        opened = "pool.acquire() as conn"
    else:
        opened = (
            f"asyncpg.create_pool({without_password(db.dsn)!r}) as pool, pool.acquire() as conn"
        )
    fix = f"async with {opened}, conn.transaction(): {_STAGE_AFTER}"
    note = (
        "the fix opens a transaction of its own: the application's write goes in it too "
        "(before the stage), or the two do not commit together"
    )
    if kind is not None:
        note = (
            f"a SQLAlchemy {kind} runs on a synchronous driver (psycopg), whose transaction no "
            f"asyncpg stage can join; {note} (create_async_engine on postgresql+asyncpg:// "
            "gives an AsyncConnection whose transaction can hold the stage)"
        )
    return OutboxNotAsyncpgError(tx, takes, fix, note)


class OutboxNotAsyncpgError(OutboxTxKindError):
    """INVALID_ARGUMENT for stage() handed no asyncpg connection; `note` says how the fix keeps
    the stage in one transaction with the application's write."""

    def __init__(self, given: object, takes: str, fix: str, note: str) -> None:
        super().__init__("postgres", given, takes, fix)
        self.cause = f"{self.cause}; {note}"
        self.args = (f"{self.code}: {self.cause}",)


# Where a connection's statements land: its database, the server (a server's start time tells
# two apart, however each was reached: a host name, an address, a proxy), and the jobs' outbox
# table there (None: no jobs schema in that database).
_IDENTITY = (
    "SELECT current_database() AS db, pg_postmaster_start_time() AS started, "
    "to_regclass($1)::oid AS outbox"
)
# The physical connections already found to reach the jobs' database: each is asked once, so a
# stage costs no extra round trip after its connection's first.
_CHECKED: weakref.WeakKeyDictionary[Any, tuple[Any, ...]] = weakref.WeakKeyDictionary()
_JOBS: weakref.WeakKeyDictionary[Connections, tuple[Any, ...]] = weakref.WeakKeyDictionary()


async def _same_database(db: Connections, tx: Any) -> None:
    """Refuse `tx` unless it reaches the jobs' database: a row staged elsewhere would never be
    published (OUTBOX_WRONG_DATABASE, as SQLite refuses another file)."""
    # A pool's proxy stands for one physical connection while acquired; that one is checked.
    physical = getattr(tx, "_con", None) or tx
    table = f"{check_schema_name(db.schema)}.outbox"
    jobs = await _jobs_identity(db, table)
    if _CHECKED.get(physical) == jobs:
        return
    (row,) = await tx.fetch(_IDENTITY, table)
    found = (row["db"], row["started"], row["outbox"])
    if found != jobs:
        # The jobs' server may have restarted since its identity was read: read it again.
        jobs = await _jobs_identity(db, table, fresh=True)
    if found != jobs:
        here = f'database "{found[0]}"' + ("" if found[2] else " (no jobs schema there)")
        if found[0] == jobs[0]:
            here += " on another server"
        fix = f"tx = await asyncpg.connect({without_password(db.dsn)!r})"
        raise OutboxWrongDatabaseError(f'database "{jobs[0]}"', here, fix)
    _CHECKED[physical] = jobs


async def _jobs_identity(db: Connections, table: str, *, fresh: bool = False) -> tuple[Any, ...]:
    """The jobs' own database as `_IDENTITY` reads it, read once per driver (or again)."""
    known = _JOBS.get(db)
    if known is None or fresh:
        (row,) = await db.idempotent(lambda c: c.fetch(_IDENTITY, table))
        known = _JOBS[db] = (row["db"], row["started"], row["outbox"])
    return known


async def claim(
    db: Connections, token: str, limit: int, lease_ms: int, now: int
) -> list[OutboxRow]:
    if limit <= 0:
        return []
    # A claim that may have committed is not sent again: its rows would sit claimed, unseen.
    found = await db.atomic(lambda c: c.fetch(db.q["outbox_claim"], now, limit, token, lease_ms))
    # A row another program wrote stays claimed and comes back at its lease's end, as a row that
    # failed to publish does; the others go on.
    claimed = readable(found, rows.outbox, lambda row: f"outbox row {row['id']!r}")
    claimed.sort(key=lambda r: (r.staged_at, r.id))
    return claimed


async def publish(
    db: Connections, enqueuer: Enqueuer, token: str, rows_: Sequence[OutboxRow], now: int
) -> list[EnqueueResult]:
    if not rows_:
        return []

    async def once(conn: Conn) -> tuple[list[EnqueueResult], bool]:
        async with conn.transaction():
            locked = await conn.fetch(db.q["outbox_owned"], [r.id for r in rows_], token)
            by_id = {row["id"]: rows.outbox(row) for row in locked}
            owned = [by_id[r.id] for r in rows_ if r.id in by_id]
            if not owned:
                return [], False
            # The enqueue and the stamp commit together, or neither does.
            results, inserted = await enqueuer.enqueue_on(conn, [r.request for r in owned])
            await conn.execute(
                db.q["outbox_mark_published"],
                now,
                [r.id for r in owned],
                [result.id for result in results],
            )
            return results, inserted

    results, inserted = await db.atomic(once)
    if inserted:
        enqueuer.signal.notify()
    return results


async def release(db: Connections, token: str, ids: Sequence[str]) -> None:
    if not ids:
        return
    await db.idempotent(lambda c: c.execute(db.q["outbox_release"], list(ids), token))


async def waiting(db: Connections, limit: int) -> OutboxWaiting:
    q = db.q["outbox_waiting"]
    row = await db.idempotent(lambda c: c.fetchrow(q, limit))
    assert row is not None  # an aggregate answers one row
    return OutboxWaiting(count=row["count"], oldest_staged_at=row["oldest"])


async def forget_published(db: Connections, published_before: int, limit: int) -> int:
    # Idempotent: run twice, it deletes rows past their keep either way.
    q = db.q["outbox_forget_published"]
    status = await db.idempotent(lambda c: c.execute(q, published_before, limit))
    return int(status.split()[-1])
