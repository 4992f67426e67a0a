"""The SQLite peers of mcp-jobs-sqlite (huey on SqliteStorage, DBOS on a SQLite system database)
in tiny mode: each completes every workload it shares, with numbers, and runs on the same
file system and durability as mcp-jobs' SQLite driver (WAL, synchronous=NORMAL).

Timing is never asserted, only that a number was produced. Skipped when the `bench` extra is
not installed.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from benchmarks.runner import run_suite
from benchmarks.sizes import sizes_for
from benchmarks.systems import SYSTEMS, available, load

pytestmark = pytest.mark.slow

PEERS = ("huey-sqlite", "dbos-sqlite")
# The workloads each peer shares with mcp-jobs-sqlite (6 needs a non-tiny profile).
SHARED = {"huey-sqlite": {1, 2, 3, 4}, "dbos-sqlite": {1, 2, 3, 4, 5}}


def _skip_unless_installed(key: str) -> None:
    if not available(key):
        pytest.skip(f"{SYSTEMS[key].requires} is not installed (pip install -e '.[bench]')")


@pytest.mark.parametrize("key", PEERS)
def test_peer_is_registered_on_sqlite(key: str) -> None:
    entry = SYSTEMS[key]
    assert entry.backend == "sqlite"
    assert SHARED[key] <= entry.workloads <= SYSTEMS["mcp-jobs-sqlite"].workloads


@pytest.mark.timeout(300)
@pytest.mark.parametrize("key", PEERS)
async def test_tiny_run_produces_numbers(key: str, tmp_path: Path) -> None:
    _skip_unless_installed(key)

    document = await run_suite(
        None, sizes_for("tiny"), profile="tiny", systems=[key], logs=tmp_path, echo=lambda _: None
    )

    assert document["failures"] == []
    assert document["meta"]["skipped"] == []
    results = document["results"]
    assert {int(w) for w, per in results.items() if key in per} == SHARED[key]
    for workload in (1, 2, 3, 5):
        if workload in SHARED[key]:
            assert results[str(workload)][key]["jobs_per_s"] > 0, workload
    pickup = results["4"][key]
    assert 0 < pickup["p50_ms"] <= pickup["p95_ms"]
    for workload in SHARED[key] - {2}:
        outcome = results[str(workload)][key]
        assert outcome["exactly_once"], (workload, outcome["check"])
    assert "synchronous" in str(document["meta"]["systems"][key]["settings"]).lower()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("key", PEERS)
async def test_install_leaves_a_wal_file(key: str, tmp_path: Path) -> None:
    """The peer's file is in WAL mode after install, as mcp-jobs' SQLite driver keeps its own."""
    _skip_unless_installed(key)
    path = tmp_path / "jobs.db"

    await load(key).install(f"sqlite:///{path}", 4)

    conn = sqlite3.connect(path)
    try:
        (mode,) = conn.execute("PRAGMA journal_mode").fetchone()
    finally:
        conn.close()
    assert mode == "wal"


@pytest.mark.timeout(60)
def test_huey_connection_commits_at_normal(tmp_path: Path) -> None:
    """huey's own `fsync` knob offers FULL or OFF; the adapter's storage runs at NORMAL."""
    _skip_unless_installed("huey-sqlite")
    from benchmarks.systems.huey_sqlite import _open

    huey, _ = _open(f"sqlite:///{tmp_path / 'jobs.db'}")
    try:
        (level,) = huey.storage.conn.execute("PRAGMA synchronous").fetchone()
    finally:
        huey.storage.close()
    assert level == 1  # NORMAL


@pytest.mark.timeout(60)
def test_dbos_sqlite_engines_commit_at_normal(tmp_path: Path) -> None:
    """Every SQLAlchemy engine on SQLite in a DBOS-on-SQLite process (DBOS builds its own inside
    launch) opens its connections in WAL at NORMAL."""
    _skip_unless_installed("dbos-sqlite")
    import sqlalchemy as sa

    import benchmarks.systems.dbos_sqlite  # noqa: F401  (registers the connect listener)

    engine = sa.create_engine(f"sqlite:///{tmp_path / 'sys.db'}")
    try:
        with engine.connect() as conn:
            level = conn.exec_driver_sql("PRAGMA synchronous").scalar()
            mode = conn.exec_driver_sql("PRAGMA journal_mode").scalar()
    finally:
        engine.dispose()
    assert (level, mode) == (1, "wal")
