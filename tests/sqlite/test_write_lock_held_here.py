"""An enqueue made while a connection of this same process holds the file's write lock (the
application's sqlite3 connection after BEGIN IMMEDIATE, or a write it has not committed) is
SQLITE_WRITE_LOCK_HELD, terminal, after ONE busy timeout — it was a retryable
DRIVER_UNAVAILABLE after six (30 s by default), waiting on a holder that most often waits on
this very call. Its fix, the outbox through the holding connection, runs as given and the job
exists once that transaction commits. A stage through another connection than the holder says
the same. A holder in ANOTHER process is waited out as before (workers legitimately wait)."""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import anyio.to_thread
import pytest
from pydantic import BaseModel

from engine import JobContext, JobRegistry, Jobs, connect, job
from engine.drivers.sqlite import connection as executor
from engine.drivers.sqlite.library import sqlite3
from engine.errors import JobsError
from engine.outbox import OutboxRelay

BUSY_MS = 50  # the driver's busy timeout here: a real wait, kept short


class Order(BaseModel):
    order_id: str


@pytest.fixture
def registry() -> JobRegistry:
    registry = JobRegistry()

    @job(idempotency_key=lambda i: f"order:{i.order_id}", registry=registry)
    async def confirm_order(input: Order, ctx: JobContext) -> None:
        return None

    return registry


@pytest.fixture
async def jobs(tmp_path: Path, registry: JobRegistry) -> AsyncIterator[Jobs]:
    opened = await connect(
        f"sqlite:///{tmp_path}/jobs.db", registry=registry, busy_timeout_ms=BUSY_MS
    )
    await opened.enqueue("confirm_order", {"order_id": "o-0"})  # its connection is open
    yield opened
    await opened.close()


@pytest.fixture
def rounds(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The busy rounds the driver's connection backed off between (no real sleep)."""
    seen: list[int] = []
    monkeypatch.setattr(executor, "_backoff", seen.append)
    return seen


def _app(tmp_path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(tmp_path / "jobs.db", isolation_level=None)
    conn.execute(f"PRAGMA busy_timeout = {BUSY_MS}")
    conn.execute("CREATE TABLE IF NOT EXISTS app_orders (id TEXT PRIMARY KEY)")
    return conn


async def test_an_enqueue_inside_the_apps_write_transaction_is_refused_at_once(
    jobs: Jobs, tmp_path: Path, rounds: list[int]
) -> None:
    conn = _app(tmp_path)
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO app_orders (id) VALUES ('o-1')")
        with pytest.raises(JobsError) as raised:
            await jobs.enqueue("confirm_order", {"order_id": "o-1"})
        error = raised.value
        assert (error.code, error.retryable) == ("SQLITE_WRITE_LOCK_HELD", False)
        assert "this process" in error.cause
        assert rounds == []  # one busy timeout, not six
        # The fix, run as given inside that transaction: the job commits with the order.
        ast.parse(error.fix)
        code = compile(error.fix, "fix", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        scope = {"jobs": jobs, "conn": conn, "name": "confirm_order"}
        await eval(code, {**scope, "input": {"order_id": "o-1"}})
        conn.commit()
    finally:
        conn.close()
    assert await OutboxRelay(jobs, relay_id="test").run_until_empty() == 1
    listed = sorted(j.input["order_id"] for j in (await jobs.list()).jobs)
    assert listed == ["o-0", "o-1"]


async def test_a_stage_through_another_connection_than_the_holder_says_so(
    jobs: Jobs, tmp_path: Path
) -> None:
    holder, other = _app(tmp_path), _app(tmp_path)
    try:
        holder.execute("BEGIN IMMEDIATE")
        other.execute("BEGIN")
        with pytest.raises(JobsError) as raised:
            await jobs.stage(other, "confirm_order", {"order_id": "o-1"})
        error = raised.value
        assert (error.code, error.retryable) == ("SQLITE_WRITE_LOCK_HELD", False)
        assert "does not hold the write lock" in error.cause
        ast.parse(error.fix)
        other.rollback()
        await jobs.stage(holder, "confirm_order", {"order_id": "o-1"})  # the fix's way
        holder.commit()
    finally:
        holder.close()
        other.close()
    assert await OutboxRelay(jobs, relay_id="test").run_until_empty() == 1


_HOLD = (
    "import sqlite3, sys; c = sqlite3.connect(sys.argv[1], isolation_level=None); "
    "c.execute('BEGIN IMMEDIATE'); print('held', flush=True); sys.stdin.readline()"
)


def _holding(path: Path) -> subprocess.Popen[str]:
    """A process that holds `path`'s write lock until a line reaches its stdin."""
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    return holder


async def test_a_holder_in_another_process_is_waited_out_as_before(
    jobs: Jobs, tmp_path: Path, rounds: list[int]
) -> None:
    holder = await anyio.to_thread.run_sync(_holding, tmp_path / "jobs.db")
    try:
        with pytest.raises(JobsError) as raised:
            await jobs.enqueue("confirm_order", {"order_id": "o-1"})
        assert (raised.value.code, raised.value.retryable) == ("DRIVER_UNAVAILABLE", True)
        assert len(rounds) == executor._BUSY_ROUNDS - 1  # every round waited
    finally:
        await anyio.to_thread.run_sync(lambda: holder.communicate("\n", timeout=30))
    await jobs.enqueue("confirm_order", {"order_id": "o-1"})  # once it let go
