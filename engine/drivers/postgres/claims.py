"""Claiming over PostgreSQL: lease due jobs in one statement, extend a lease by heartbeat.

The claim rule itself (which rows, in what order, what a claim writes) is queries.sql's `claim`,
pinned to engine.rules by tests/postgres/test_rules_agree.py.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import asyncpg

from engine import rules
from engine.clock import Clock
from engine.driver_errors import DriverUnavailableError, StoreDamagedError
from engine.drivers.damage import UndecodableRow, burial, log_burial
from engine.drivers.postgres import rows
from engine.drivers.postgres.connections import Connections
from engine.drivers.postgres.faults import is_retried
from engine.drivers.postgres.jobs import nack_row
from engine.drivers.postgres.schema_version import Conn
from engine.drivers.postgres.sweep import Sweeper
from engine.errors import JobSlotLostError
from engine.ids import new_token
from schemas.jobs import ClaimedJob, ClaimExclusion, HeartbeatResult
from schemas.trusted import trusted_constructor

# How stale the paused set a claim filters by may be: another process's pause holds within this
# (this process's own pause or resume at once).
PAUSES_REFRESH_S = 1.0

_claimed_job = trusted_constructor(ClaimedJob)


class Claimer:
    """`claim` and `heartbeat` over `db`, with what a claiming process keeps between claims:
    the jobs table's sweeper (and, in `db.grace`, when expired leases may be taken over again
    after an outage)."""

    def __init__(self, db: Connections, clock: Clock, vacuum_dead_rows: int) -> None:
        self.db = db
        self.clock = clock
        self.vacuum_dead_rows = vacuum_dead_rows
        # Made by the first claim: only a process that claims vacuums.
        self.sweeper: Sweeper | None = None
        # The paused queues and job names, and when (monotonic) they were read.
        self._paused: tuple[list[str], list[str]] = ([], [])
        self._paused_read = -PAUSES_REFRESH_S

    def forget_pauses(self) -> None:
        """This process paused or resumed something: the next claim reads the pauses again."""
        self._paused_read = -PAUSES_REFRESH_S

    async def _pauses(self, conn: Conn) -> tuple[list[str], list[str]]:
        if time.monotonic() - self._paused_read >= PAUSES_REFRESH_S:
            rows = await conn.fetch(self.db.q["pauses"])
            queues = [r["name"] for r in rows if r["kind"] == "queue"]
            self._paused = (queues, [r["name"] for r in rows if r["kind"] == "job"])
            self._paused_read = time.monotonic()
        return self._paused

    async def claim(
        self,
        worker_id: str,
        limit: int,
        lease_ms: int,
        queues: Sequence[str] | None = None,
        excluding: ClaimExclusion | None = None,
    ) -> list[ClaimedJob]:
        if limit <= 0 or (queues is not None and not queues):
            return []
        db = self.db
        # Settles held through an outage first: their jobs are not run again here.
        if db.retry.holding:
            await db.retry.flush_held()
        token = new_token()
        try:
            async with db.planned_once() as conn:
                found = await self._claim_rows(
                    conn, worker_id, limit, lease_ms, queues, token, excluding
                )
        except DriverUnavailableError as exc:
            if not db.retry.deadline_ms or not is_retried(exc):
                raise

            async def again(first: bool) -> list[asyncpg.Record]:
                async with db.planned_once() as conn:
                    # The broken try may have committed: its rows carry its token.
                    mine = await conn.fetch(db.q["claimed_with"], token)
                    if mine:
                        return mine
                    return await self._claim_rows(
                        conn, worker_id, limit, lease_ms, queues, token, excluding
                    )

            found = await db.retry.retrying(again)
        # Typed by the claim's own columns (schemas.trusted): no second validation per job.
        claimed: list[ClaimedJob] = []
        for row in found:
            try:
                record = rows.job(row)
            except UndecodableRow as exc:
                # The others claimed with it still run; this one is settled without being read.
                await self._bury(exc.job_id, row["lease_token"], db.damaged(exc))
                continue
            claimed.append(
                _claimed_job(
                    {
                        "record": record,
                        "token": row["lease_token"],
                        "lease_expires_at": row["lease_expires_at"],
                        "has_steps": row["has_steps"],
                    }
                )
            )
        claimed.sort(key=lambda c: rules.claim_rank(c.record))
        if claimed:
            sweeper = self.sweeper
            if sweeper is None:
                sweeper = self.sweeper = Sweeper(db, self.vacuum_dead_rows)
            sweeper.claimed(len(claimed))
        return claimed

    async def _bury(self, job_id: str, token: str, damage: StoreDamagedError) -> None:
        options, outcome = burial(damage, self.clock.now_ms())
        await nack_row(self.db, job_id, token, options, self.clock.now_ms())
        log_burial("postgres", outcome.state, damage)

    async def _claim_rows(
        self,
        conn: Conn,
        worker_id: str,
        limit: int,
        lease_ms: int,
        queues: Sequence[str] | None,
        token: str,
        excluding: ClaimExclusion | None,
    ) -> list[asyncpg.Record]:
        db = self.db
        now = self.clock.now_ms()
        # After an outage, running jobs keep their leases one lease longer: holders that lived
        # through it reach the server again, flush their settles and heartbeat.
        outage = db.grace.outage_seen
        take_over = db.grace.take_over(outage, now)
        paused_queues, paused_jobs = await self._pauses(conn)
        tenants: list[str] = []
        if excluding is not None:
            paused_queues = [*paused_queues, *excluding.queues]
            paused_jobs = [*paused_jobs, *excluding.names]
            tenants = list(excluding.tenants)
        if queues is None:
            found = await conn.fetch(
                db.q["claim"],
                now,
                limit,
                worker_id,
                lease_ms,
                token,
                take_over,
                paused_queues,
                paused_jobs,
                tenants,
            )
        else:
            found = await conn.fetch(
                db.q["claim_queues"],
                now,
                limit,
                worker_id,
                lease_ms,
                token,
                list(queues),
                take_over,
                paused_queues,
                paused_jobs,
                tenants,
            )
        db.grace.claimed(outage, now, lease_ms)
        return found

    async def heartbeat(self, job_id: str, token: str, lease_ms: int) -> HeartbeatResult:
        expires = self.clock.now_ms() + lease_ms
        q = self.db.q["heartbeat"]
        found = await self.db.idempotent(lambda c: c.fetch(q, job_id, token, expires))
        if not found:
            raise JobSlotLostError(job_id)
        row = found[0]
        if row["state"] == "cancelled":
            return HeartbeatResult(
                lease_expires_at=row["lease_expires_at"] or 0, cancel_requested=True
            )
        return HeartbeatResult(lease_expires_at=row["lease_expires_at"], cancel_requested=False)

    async def close(self) -> None:
        if self.sweeper is not None:
            await self.sweeper.close()
