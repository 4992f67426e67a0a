"""The physical floor: the least a durable PostgreSQL queue can do, on raw asyncpg.

One `UPDATE … WHERE id IN (SELECT … FOR UPDATE SKIP LOCKED LIMIT n) RETURNING` claims a batch;
completions are batched into one `UPDATE … WHERE id = ANY(…)` per flush; a statement trigger's
NOTIFY wakes an idle worker. Steps are rows inserted with group commit: every step waits for the
commit that holds its own row, and concurrent jobs share commits. No leases, retries, dedupe or
limits — it is the yardstick, not a queue anyone should run.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import asyncpg

from benchmarks.systems.base import STEP_COUNT, Kind, Producer, System
from benchmarks.tally import Tally

CHANNEL = "floor_jobs"
POLL_S = 1.0

SCHEMA = f"""
CREATE TABLE floor_jobs (
    id bigserial PRIMARY KEY,
    kind text NOT NULL,
    payload jsonb NOT NULL,
    status text NOT NULL DEFAULT 'ready',
    attempts int NOT NULL DEFAULT 0,
    locked_at timestamptz,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX floor_jobs_ready ON floor_jobs (kind, id) WHERE status = 'ready';
CREATE TABLE floor_steps (
    job_id bigint NOT NULL,
    name text NOT NULL,
    output jsonb,
    PRIMARY KEY (job_id, name)
);
CREATE FUNCTION floor_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN PERFORM pg_notify('{CHANNEL}', ''); RETURN NULL; END $$;
CREATE TRIGGER floor_jobs_notify AFTER INSERT ON floor_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION floor_notify();
"""

INSERT_ONE = "INSERT INTO floor_jobs (kind, payload) VALUES ($1, $2::jsonb)"
INSERT_MANY = (
    "INSERT INTO floor_jobs (kind, payload) SELECT $1, p FROM unnest($2::jsonb[]) AS p RETURNING id"
)
CLAIM = """
UPDATE floor_jobs SET status = 'running', attempts = attempts + 1, locked_at = now()
WHERE id IN (
    SELECT id FROM floor_jobs WHERE status = 'ready' AND kind = $2
    ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED
)
RETURNING id, payload
"""
COMPLETE = "UPDATE floor_jobs SET status = 'done', locked_at = NULL WHERE id = ANY($1::bigint[])"
SAVE_STEPS = """
INSERT INTO floor_steps (job_id, name, output)
SELECT * FROM unnest($1::bigint[], $2::text[], $3::jsonb[])
"""
UNFINISHED = "SELECT count(*) FROM floor_jobs WHERE kind = $1 AND status <> 'done'"


class GroupCommit:
    """Rows written by one connection, many per commit: whatever queued up while the previous
    commit ran goes into the next one. `write` returns only once its own row is committed."""

    def __init__(self, flush: Callable[[list[tuple[Any, ...]]], Awaitable[None]]) -> None:
        self._flush = flush
        self._pending: list[tuple[tuple[Any, ...], asyncio.Future[None] | None]] = []
        self._kick = asyncio.Event()
        self._flushing = False
        self._task = asyncio.create_task(self._run())

    async def write(self, *row: Any) -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._pending.append((row, future))
        self._kick.set()
        await future

    def add(self, *row: Any) -> None:
        """Queue a row without waiting for its commit (completions)."""
        self._pending.append((row, None))
        self._kick.set()

    async def _run(self) -> None:
        while True:
            await self._kick.wait()
            self._kick.clear()
            batch, self._pending = self._pending, []
            if not batch:
                continue
            self._flushing = True
            try:
                await self._flush([row for row, _ in batch])
            except Exception as exc:
                for _, future in batch:
                    if future is not None and not future.done():
                        future.set_exception(exc)
                continue
            finally:
                self._flushing = False
            for _, future in batch:
                if future is not None and not future.done():
                    future.set_result(None)

    async def close(self) -> None:
        """Flush what is queued and let the flush in flight commit, then stop."""
        while self._pending or self._flushing:
            self._kick.set()
            await asyncio.sleep(0.001)
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task


class _FloorProducer(Producer):
    def __init__(self, conn: asyncpg.Connection[Any]) -> None:
        self.conn = conn

    async def enqueue_one(self, kind: Kind, i: int) -> None:
        await self.conn.execute(INSERT_ONE, kind, json.dumps({"i": i}))

    async def enqueue_many(self, kind: Kind, indexes: Sequence[int]) -> list[str]:
        rows = await self.conn.fetch(INSERT_MANY, kind, [json.dumps({"i": i}) for i in indexes])
        return [str(r["id"]) for r in rows]

    async def close(self) -> None:
        await self.conn.close()


class Floor(System):
    def settings(self, concurrency: int) -> dict[str, Any]:
        return {
            "claim": "UPDATE … WHERE id IN (SELECT … FOR UPDATE SKIP LOCKED LIMIT free) RETURNING",
            "completion": "batched UPDATE … WHERE id = ANY($1), one per flush",
            "steps": "INSERT per step, group commit across jobs, each step awaits its commit",
            "wake-up": "LISTEN/NOTIFY (statement trigger), poll every 1 s",
            "concurrency": concurrency,
            "loop": self.loop,
        }

    async def install(self, url: str, concurrency: int) -> None:
        conn = await asyncpg.connect(url)
        try:
            await conn.execute(SCHEMA)
        finally:
            await conn.close()

    async def producer(self, url: str) -> Producer:
        return _FloorProducer(await asyncpg.connect(url))

    async def run_worker(self, url: str, kind: Kind, concurrency: int, tally: Tally) -> None:
        listen, claim_conn, done_conn, steps_conn = [await asyncpg.connect(url) for _ in range(4)]
        # One wake-up for everything the loop waits on: a NOTIFY, a freed slot, the poll tick.
        signal = asyncio.Event()
        inflight = 0

        async def complete(rows: list[tuple[Any, ...]]) -> None:
            await done_conn.execute(COMPLETE, [r[0] for r in rows])

        async def save_steps(rows: list[tuple[Any, ...]]) -> None:
            await steps_conn.execute(
                SAVE_STEPS, [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows]
            )

        completions = GroupCommit(complete)
        steps = GroupCommit(save_steps)

        async def run_one(job_id: int, raw: str) -> None:
            nonlocal inflight
            i = int(json.loads(raw)["i"])
            try:
                tally.start(i)
                if kind == "steps":
                    for k in range(STEP_COUNT):
                        await steps.write(job_id, f"step-{k}", json.dumps(k))
                tally.end(i)
                completions.add(job_id)
            finally:
                inflight -= 1
                signal.set()

        async def tick() -> None:
            while True:
                await asyncio.sleep(POLL_S)
                signal.set()

        await listen.add_listener(CHANNEL, lambda *_: signal.set())
        ticker = asyncio.create_task(tick())
        tasks: set[asyncio.Task[None]] = set()
        try:
            tally.begin()
            while not tally.complete:
                free = concurrency - inflight
                if free > 0:
                    signal.clear()
                    rows = await claim_conn.fetch(CLAIM, free, kind)
                    for row in rows:
                        inflight += 1
                        task = asyncio.create_task(run_one(row["id"], row["payload"]))
                        tasks.add(task)
                        task.add_done_callback(tasks.discard)
                    if len(rows) == free:
                        continue
                else:
                    signal.clear()
                await signal.wait()
            if tasks:
                await asyncio.gather(*tasks)
            await completions.close()
            await steps.close()
        finally:
            ticker.cancel()
            for conn in (listen, claim_conn, done_conn, steps_conn):
                await conn.close()

    async def unfinished(self, url: str, kind: Kind) -> int:
        conn = await asyncpg.connect(url)
        try:
            count: int = await conn.fetchval(UNFINISHED, kind)
        finally:
            await conn.close()
        return count
