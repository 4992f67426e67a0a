"""The shop's own database: a SQLite file (env `SHOP_DB`, default `./.mcp-jobs/shop.db`).

This is the application's data, not the jobs database: the jobs only read and write it through
their steps, the way a real app's jobs touch its own tables.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path

from engine import uses_environment

SHOP_DB_ENV = "SHOP_DB"
DEFAULT_SHOP_DB = ".mcp-jobs/shop.db"
# Declared, so every command handed out (a fix line) carries the same shop, from any directory.
uses_environment(SHOP_DB_ENV, default=DEFAULT_SHOP_DB, path=True)

SCHEMA = """
CREATE TABLE IF NOT EXISTS stock (sku TEXT PRIMARY KEY, on_hand INTEGER NOT NULL,
    price_cents INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY, sku TEXT NOT NULL,
    quantity INTEGER NOT NULL, status TEXT NOT NULL, amount_cents INTEGER,
    charge_id TEXT, tracking TEXT, updated_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP);
CREATE TABLE IF NOT EXISTS supplier_calls (id INTEGER PRIMARY KEY, import_run TEXT NOT NULL,
    at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP);
CREATE TABLE IF NOT EXISTS receipts (order_id INTEGER NOT NULL, tenant TEXT NOT NULL,
    email TEXT NOT NULL, sent_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP,
    PRIMARY KEY (tenant, order_id));
"""

STARTING_STOCK = (("tea-green", 500, 450), ("tea-black", 500, 400), ("mug", 100, 1200))


def shop_db_path() -> Path:
    return Path(os.environ.get(SHOP_DB_ENV) or DEFAULT_SHOP_DB)


def connect() -> sqlite3.Connection:
    """A connection with the shop's tables present. One per call: the steps that use it run in
    worker threads, and a sqlite3 connection belongs to the thread that opened it."""
    path = shop_db_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, timeout=10)
    conn.row_factory = sqlite3.Row
    conn.executescript(SCHEMA)
    conn.executemany(
        "INSERT OR IGNORE INTO stock (sku, on_hand, price_cents) VALUES (?, ?, ?)", STARTING_STOCK
    )
    conn.commit()
    return conn


@contextmanager
def transaction() -> Iterator[sqlite3.Connection]:
    """One connection, one transaction: committed on success, rolled back on error, closed."""
    with closing(connect()) as conn, conn:
        yield conn
