"""OUTBOX_NO_TX on SQLite gives the sqlite3 form of its fix (a sqlite3 connection has no
`.transaction()`), and that line, run as given, stages the job."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Literal

import pytest
from pydantic import BaseModel

from engine import JobContext, JobRegistry, JobsError, ManualClock, connect, job
from engine.drivers.sqlite.library import sqlite3  # the driver's module: stdlib or pysqlite3
from engine.outbox import OutboxRelay


class Order(BaseModel):
    order_id: str


@pytest.mark.parametrize("isolation_level", ["DEFERRED", None])
async def test_the_no_transaction_fix_runs_as_given(
    tmp_path: Path,
    registry: JobRegistry,
    clock: ManualClock,
    isolation_level: Literal["DEFERRED"] | None,
) -> None:
    @job(idempotency_key=lambda i: i.order_id, registry=registry)
    async def confirm(input: Order, ctx: JobContext) -> None:
        return None

    path = tmp_path / "jobs.db"
    jobs = await connect(f"sqlite:///{path}", registry=registry, clock=clock)
    conn = sqlite3.connect(path, isolation_level=isolation_level)
    try:
        name, input = "confirm", {"order_id": "o-1"}
        with pytest.raises(JobsError) as raised:
            await jobs.stage(conn, name, input)
        assert raised.value.code == "OUTBOX_NO_TX"
        code = compile(raised.value.fix, "fix", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        await eval(code, {"conn": conn, "jobs": jobs, "name": name, "input": input})
        assert not conn.in_transaction
        assert await OutboxRelay(jobs, relay_id="t").run_until_empty() == 1
        assert [j.input for j in (await jobs.list()).jobs] == [input]
    finally:
        conn.close()
        await jobs.close()
