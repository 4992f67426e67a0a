"""The shop's backfill: normalise customer emails (lowercase, no surrounding spaces).

The kind of sweep a real app needs once per environment — say, before a unique index on
`lower(email)` can be added — over its own table `customers(id INTEGER PRIMARY KEY, email TEXT)`
in the shop's SQLite file (env `SHOP_DB`, default `./.mcp-jobs/shop.db`).

    mcp-jobs backfill normalize_emails --app examples.shop --json            # dry run
    mcp-jobs backfill normalize_emails --app examples.shop --write --json    # the durable pass

`seed_customers(n)` creates and fills the table for the demo. Self-contained: stdlib sqlite3,
called through `anyio.to_thread` so a batch never blocks the worker's event loop.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import anyio.to_thread

from engine.backfill import backfill
from examples.shop.db import shop_db_path

# The rows still to do. count() and read() select on exactly this, or the pass fails
# BACKFILL_STALLED rather than report a sweep that left rows behind.
DIRTY = "email <> lower(trim(email))"

SEED_COMMAND = 'python -c "from examples.shop.backfills import seed_customers; seed_customers(200)"'


def _path() -> Path:
    return shop_db_path()


def _read_only() -> sqlite3.Connection | None:
    """A read-only connection, or None when the file does not exist. Read-only so that a dry run
    (which calls requires, count and read) cannot create or change anything."""
    path = _path()
    if not path.exists():
        return None
    return sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=10)


def _missing_table() -> str | None:
    conn = _read_only()
    if conn is None:
        return f"the shop database {_path()}"
    try:
        found = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'customers'"
        ).fetchone()
    finally:
        conn.close()
    return None if found else "the customers table"


def _count() -> int:
    conn = _read_only()
    if conn is None:
        return 0
    try:
        (n,) = conn.execute(f"SELECT count(*) FROM customers WHERE {DIRTY}").fetchone()
    finally:
        conn.close()
    return int(n)


def _read(after: int | None, limit: int) -> list[dict[str, Any]]:
    conn = _read_only()
    if conn is None:
        return []
    try:
        rows = conn.execute(
            f"SELECT id, email FROM customers WHERE {DIRTY} AND id > ? ORDER BY id LIMIT ?",
            (-1 if after is None else after, limit),
        ).fetchall()
    finally:
        conn.close()
    return [{"id": row_id, "email": email} for row_id, email in rows]


def _normalize(ids: list[int]) -> None:
    conn = sqlite3.connect(_path(), timeout=10)
    try:
        with conn:  # one transaction per batch
            # The WHERE repeats the predicate, so handling a batch twice (a crash between the
            # update and the step's record) changes nothing the second time.
            conn.executemany(
                f"UPDATE customers SET email = lower(trim(email)) WHERE id = ? AND {DIRTY}",
                [(i,) for i in ids],
            )
    finally:
        conn.close()


async def requires_customers() -> str | None:
    return await anyio.to_thread.run_sync(_missing_table)


async def count_dirty() -> int:
    return await anyio.to_thread.run_sync(_count)


async def read_dirty(after: Any, limit: int) -> list[dict[str, Any]]:
    return await anyio.to_thread.run_sync(_read, after, limit)


async def normalize(rows: list[dict[str, Any]]) -> None:
    """Lowercase and trim the batch's emails."""
    await anyio.to_thread.run_sync(_normalize, [int(row["id"]) for row in rows])


normalize_emails = backfill(
    name="normalize_emails",
    count=count_dirty,
    read=read_dirty,
    key=lambda row: row["id"],
    handle=normalize,
    batch_size=50,
    rate=20,  # at most 20 batches a second, to leave the shop's database room for orders
    requires=requires_customers,
    requires_fix=SEED_COMMAND,
    description="lowercase and trim customers.email (before a unique index on it)",
)


def seed_customers(n: int, *, clean_every: int = 4) -> int:
    """Create `customers` and fill ids 1..n (replacing them), every `clean_every`-th already
    normalised and the rest not. Returns how many rows the backfill has to do."""
    path = _path()
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = [
        (i, f"customer{i}@shop.example" if i % clean_every == 0 else f"  Customer{i}@Shop.EXAMPLE ")
        for i in range(1, n + 1)
    ]
    conn = sqlite3.connect(path, timeout=10)
    try:
        with conn:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS customers (id INTEGER PRIMARY KEY, email TEXT NOT NULL)"
            )
            conn.executemany("INSERT OR REPLACE INTO customers (id, email) VALUES (?, ?)", rows)
    finally:
        conn.close()
    return sum(1 for _, email in rows if email != email.strip().lower())


__all__ = ["normalize_emails", "seed_customers"]
