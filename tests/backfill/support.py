"""The test app's own data: a real SQLite table of customers, and a backfill over it with hooks a
test uses to fail, block or watch a batch. Plain stdlib sqlite3, separate from the jobs database."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio

from engine import ManualClock
from engine.backfill import BackfillDefinition, BackfillRegistry, backfill
from engine.drivers.sqlite.library import sqlite3
from schemas.backfill import BackfillRun

DIRTY = "email != lower(trim(email))"


class BackfillHandleFailure(Exception):
    """App code failing. A plain Exception on purpose: the pass must propagate the handler's own
    error, so a framework error here would exercise a path no app takes."""


class Customers:
    """`customers(id INTEGER PRIMARY KEY, email TEXT)`: `dirty` ids hold un-normalised emails."""

    def __init__(self, path: Path, rows: int, clean_every: int = 0) -> None:
        self.db = sqlite3.connect(path, isolation_level=None)
        self.db.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, email TEXT NOT NULL)")
        values = []
        for i in range(1, rows + 1):
            clean = clean_every > 0 and i % clean_every == 0
            values.append((i, f"user{i}@example.com" if clean else f"  User{i}@Example.COM "))
        self.db.executemany("INSERT INTO customers (id, email) VALUES (?, ?)", values)
        self.dirty_ids = [i for i, email in values if email != email.strip().lower()]
        self.handled: list[list[int]] = []  # ids of each handle() call that completed
        self.fail_once: set[int] = set()  # first ids of batches whose handle() raises once
        self.always_fail = False
        self.block_at: dict[int, anyio.Event] = {}  # first id -> released by the test
        self.entered: dict[int, anyio.Event] = {}  # first id -> set when handle() reaches it
        self.count_calls = 0
        self.read_calls = 0
        # Narrows read() without narrowing count(): the authoring bug BACKFILL_STALLED catches.
        self.read_max_id: int | None = None

    def close(self) -> None:
        self.db.close()

    def snapshot(self) -> list[tuple[int, str]]:
        return list(self.db.execute("SELECT id, email FROM customers ORDER BY id"))

    def remaining(self) -> int:
        (n,) = self.db.execute(f"SELECT count(*) FROM customers WHERE {DIRTY}").fetchone()
        return int(n)

    def batches(self, size: int) -> list[list[int]]:
        ids = self.dirty_ids
        return [ids[i : i + size] for i in range(0, len(ids), size)]

    # --- the declaration's functions -----------------------------------------------------------

    async def count(self) -> int:
        self.count_calls += 1
        return self.remaining()

    async def read(self, after: Any, limit: int) -> list[dict[str, Any]]:
        self.read_calls += 1
        sql = f"SELECT id, email FROM customers WHERE {DIRTY} AND id > ?"
        args: list[Any] = [-1 if after is None else int(after)]
        if self.read_max_id is not None:
            sql += " AND id <= ?"
            args.append(self.read_max_id)
        sql += " ORDER BY id LIMIT ?"
        args.append(limit)
        return [{"id": i, "email": e} for i, e in self.db.execute(sql, args)]

    async def handle(self, rows: list[dict[str, Any]]) -> None:
        ids = [int(r["id"]) for r in rows]
        first = ids[0]
        if first in self.entered:
            self.entered[first].set()
        if first in self.block_at:
            await self.block_at.pop(first).wait()
        if self.always_fail:
            raise BackfillHandleFailure(f"customers {first}..{ids[-1]}: database is locked")
        if first in self.fail_once:
            self.fail_once.discard(first)
            raise BackfillHandleFailure(f"customers {first}..{ids[-1]}: database is locked")
        self.db.executemany(
            "UPDATE customers SET email = lower(trim(email)) WHERE id = ?", [(i,) for i in ids]
        )
        self.handled.append(ids)

    def declare(
        self,
        registry: BackfillRegistry,
        *,
        name: str = "normalize_emails",
        batch_size: int = 10,
        rate: float | None = None,
        environments: Sequence[str] = (),
        requires: Any = None,
        requires_fix: str | None = None,
    ) -> BackfillDefinition:
        return backfill(
            name=name,
            count=self.count,
            read=self.read,
            key=lambda row: row["id"],
            handle=self.handle,
            batch_size=batch_size,
            rate=rate,
            environments=environments,
            requires=requires,
            requires_fix=requires_fix,
            description="lowercase and trim customer emails",
            registry=registry,
        )


class RecordingClock(ManualClock):
    """A ManualClock that also tells a test how long each sleeper asked to wait, so a test can
    wait for "the pass is now throttled" as an event instead of guessing."""

    def __init__(self) -> None:
        super().__init__()
        self.requested: list[int] = []
        self._changed = anyio.Event()

    async def sleep_ms(self, ms: int) -> None:
        self.requested.append(ms)
        self._changed.set()
        self._changed = anyio.Event()
        await super().sleep_ms(ms)

    async def wait_for_sleep(self, ms: int) -> None:
        """Return once a sleeper has asked for exactly `ms` (since the last call)."""
        while ms not in self.requested:
            await self._changed.wait()
        self.requested.remove(ms)


def flatten(batches: Sequence[Sequence[int]]) -> list[int]:
    return [i for batch in batches for i in batch]


async def count() -> int:
    return 0


async def read(after: Any, limit: int) -> list[Any]:
    return []


async def handle(rows: list[Any]) -> None:
    return None


def key(row: Any) -> Any:
    return row["id"]


def declare_empty(registry: BackfillRegistry, name: str = "fill", **overrides: Any) -> None:
    """A backfill over no rows, keyed by the row itself: for calls that only need one declared."""
    arguments: dict[str, Any] = {"count": count, "read": read, "key": lambda row: row}
    backfill(name=name, handle=handle, registry=registry, **{**arguments, **overrides})


def declare(registry: BackfillRegistry, **overrides: Any) -> Any:
    """A backfill that sweeps nothing, `normalize_emails` unless `overrides` say otherwise: for
    the declaration's own checks, which never run it."""
    arguments: dict[str, Any] = {
        "name": "normalize_emails",
        "count": count,
        "read": read,
        "key": key,
        "handle": handle,
        "registry": registry,
    }
    arguments.update(overrides)
    return backfill(**arguments)


def ledger_run(
    n: int,
    name: str = "retired_sweep",
    *,
    environment: str = "development",
    checksum: str = "708081e4a20c5b77",
) -> BackfillRun:
    """A completed ledger row numbered `n` (its run id and times follow `n`), as a pass writes."""
    return BackfillRun(
        run_id=f"run{n:04d}",
        name=name,
        checksum=checksum,
        environment=environment,
        status="completed",
        app_version=None,
        rows_processed=35,
        rows_total=35,
        started_at=1_000 + n,
        finished_at=2_000 + n,
    )
